import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { neon } from '@neondatabase/serverless';
import type { NeonOptions } from '../../db/connection-options.js';
import { applyNeonOptions } from '../../db/drivers/neon-config.js';
import { startNeonHttpEndpoint } from '../../testing/neon-http-endpoint.js';
import { localNeonOptions } from '../../testing/neon-local.js';

/** The environment variable that turns a bench bundle into the SQL-over-HTTP endpoint alone. */
const ROLE = 'SKIPLOCK_BENCH_ROLE';
const ENDPOINT_ROLE = 'neon-http-endpoint';
/** The round trip the endpoint's process adds to every request (ms), when started for a slow link. */
const ROUND_TRIP = 'SKIPLOCK_BENCH_ADDED_RTT_MS';

export interface NeonHttpEndpointProcess {
  /** For `connect({ driver: 'neon-http', neon })`: the endpoint's URL as Neon's fetchEndpoint. */
  neon: NeonOptions;
  url: string;
  /** What it adds to every request's round trip, ms (a slow link; 0: none). */
  addedRoundTripMs: number;
  /** Its process id: the bench reads the endpoint's own CPU time from /proc. */
  pid: number | undefined;
  close(): Promise<void>;
}

/**
 * The local SQL-over-HTTP endpoint (testing/neon-http-endpoint.ts) in a process of its own, as
 * Neon's proxy is a machine of its own: its JSON work and its pool then stop competing with the
 * invocations for this process's event loop (they still share the machine's cores). It is this
 * same bundle started again with SKIPLOCK_BENCH_ROLE set: the entry point calls
 * `serveNeonHttpEndpointIfAsked()` first, which serves and never returns. With `addedRoundTripMs`,
 * every request waits that much longer in all (half before it runs, half before its answer): a
 * function far from its database.
 */
export async function startNeonHttpEndpointProcess(addedRoundTripMs = 0): Promise<NeonHttpEndpointProcess> {
  const script = process.argv[1];
  if (!script) throw new Error('no script to start the endpoint from');
  const child = spawn(process.execPath, [...process.execArgv, script], {
    env: { ...process.env, [ROLE]: ENDPOINT_ROLE, [ROUND_TRIP]: String(addedRoundTripMs) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const url = await firstLine(child).catch((err: unknown) => {
    child.kill();
    throw err;
  });
  return {
    url,
    addedRoundTripMs,
    pid: child.pid,
    neon: localNeonOptions({ wsProxyPort: 0, httpUrl: url }),
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.stdin?.end();
      const timer = setTimeout(() => child.kill(), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * Warms the endpoint as a deployed proxy is warm: its code compiled and a connection open per
 * invocation. `rounds` rounds of `connections` concurrent queries on the database at `url` — the
 * database about to be measured: the endpoint keeps a pool per connection string.
 */
export async function warmNeonHttpEndpoint(
  endpoint: { neon: NeonOptions },
  url: string,
  connections = 20,
  rounds = 100,
) {
  applyNeonOptions(endpoint.neon);
  const sql = neon(url);
  const round = () => Promise.all(Array.from({ length: connections }, (_, i) => sql.query('select $1::int as n', [i])));
  for (let r = 0; r < rounds; r++) await round();
  // A backend reports its counts to the statistics at most once a second, and an idle one 10 s
  // after its last transaction: the drain that reuses these connections would count the warm-up's
  // commits among its statements (0.07–0.1 per job of a 10,000-job burst) unless they are reported
  // before it starts.
  await new Promise((resolve) => setTimeout(resolve, IDLE_STATS_MS));
}

/** Postgres's PGSTAT_IDLE_INTERVAL (10 s), and a little more. */
const IDLE_STATS_MS = 10_500;

/** In the endpoint's process: serve until the parent closes stdin (or dies), then exit. */
export async function serveNeonHttpEndpointIfAsked(): Promise<void> {
  if (process.env[ROLE] !== ENDPOINT_ROLE) return;
  const endpoint = await startNeonHttpEndpoint({ addedRoundTripMs: Number(process.env[ROUND_TRIP] ?? 0) });
  process.stdout.write(`${endpoint.url}\n`);
  process.stdin.resume();
  await once(process.stdin, 'end');
  await endpoint.close();
  process.exit(0);
}

/** How long the endpoint's process may take to listen, and to stop once asked. */
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;

async function firstLine(child: ChildProcess): Promise<string> {
  const stdout = child.stdout as NodeJS.ReadableStream;
  const lines = createInterface({ input: stdout });
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`the SQL-over-HTTP endpoint's process exited (${code}) before it listened`);
  });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the SQL-over-HTTP endpoint's process did not listen within ${START_TIMEOUT_MS} ms`)),
      START_TIMEOUT_MS,
    );
  });
  try {
    const [line] = (await Promise.race([once(lines, 'line'), exited, late])) as [string];
    return line.trim();
  } finally {
    clearTimeout(timer);
    lines.close();
    // Whatever the endpoint writes later is drained, so that a full pipe never blocks it.
    stdout.resume();
  }
}
