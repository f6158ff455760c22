/**
 * Dev probe: the serverless bench's burst drain alone
 * (`node .bench/probe-burst.mjs [pg|neon-http|neon-http-apart|floor|floor-neon-http] [ROUNDS] [ADDED_RTT_MS]`),
 * the same parameters as `npm run bench:serverless` phase 2, for A/B runs of the small-batch path.
 * neon-http: the SQL-over-HTTP endpoint in this process; neon-http-apart and floor-neon-http: in a
 * process of its own (bench/serverless/neon-endpoint.ts), as the bench runs it. ADDED_RTT_MS: a slow
 * link (the bench's `--rtt`): on pg a delaying proxy, on neon-http-apart the endpoint's own delay.
 */
import { neonConfig } from '@neondatabase/serverless';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { startLocalNeon } from '../testing/neon-local.js';
import { freshDatabase } from './db.js';
import { measureBurstDrain } from './serverless/burst.js';
import { measureBurstFloor } from './serverless/burst-floor.js';
import {
  serveNeonHttpEndpointIfAsked,
  startNeonHttpEndpointProcess,
  warmNeonHttpEndpoint,
} from './serverless/neon-endpoint.js';
import { invocationUrl } from './serverless/worker-function.js';

await serveNeonHttpEndpointIfAsked();

Object.assign(process.env, {
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'skiplock-bench',
  AWS_SECRET_ACCESS_KEY: 'skiplock-bench',
});
process.on('uncaughtException', (err) => {
  if ((err as { code?: string }).code === '57P01') return;
  console.error(err);
  process.exit(1);
});
const mode = process.argv[2] ?? 'pg';
const driver = mode.includes('neon-http') ? 'neon-http' : 'pg';
const rounds = Number(process.argv[3] ?? 1);
const addedRoundTripMs = Number(process.argv[4] ?? 0);
if (addedRoundTripMs > 0 && mode !== 'pg' && mode !== 'neon-http-apart') {
  throw new Error('a slow link (ADDED_RTT_MS) is measured on pg and neon-http-apart');
}
const params = {
  jobs: 10_000,
  jobMs: 100,
  concurrency: 10,
  maxInvocations: 20,
  functionTimeoutMs: 60_000,
  giveUpMs: 90_000,
};
/**
 * PROBE_HTTP=1: every request the drain sends over neon-http counted by what it runs (the text's
 * start), with its request body and answer in bytes — a diagnostic run (the counting costs CPU).
 */
const httpRequests = new Map<string, { n: number; sent: number; received: number; ms: number }>();
if (process.env.PROBE_HTTP === '1') {
  neonConfig.fetchFunction = async (url: string, init: RequestInit) => {
    const body = String(init.body ?? '');
    const claim = body.includes('ready as (');
    const label = claim
      ? `claim${body.includes('in_lane as (') ? ' from a lane' : ''}${body.includes('settle_input as (') ? ' + settle' : ''}`
      : body.slice(0, 60);
    const t = performance.now();
    const response = await fetch(url, init);
    const answer = await response.arrayBuffer();
    const seen = httpRequests.get(label) ?? { n: 0, sent: 0, received: 0, ms: 0 };
    seen.n++;
    seen.sent += body.length;
    seen.received += answer.byteLength;
    seen.ms += performance.now() - t;
    httpRequests.set(label, seen);
    return new Response(answer, { status: response.status, headers: response.headers });
  };
}
function printRequests() {
  for (const [label, h] of httpRequests) {
    console.log(
      `  ${(h.n / params.jobs).toFixed(3)} requests per job, ${Math.round(h.sent / h.n)} B sent, ${Math.round(h.received / h.n)} B received, ${(h.ms / h.n).toFixed(1)} ms each: ${JSON.stringify(label)}`,
    );
  }
  httpRequests.clear();
}
const server = (await resolveTestDatabase()).url;
const neon =
  mode === 'neon-http'
    ? await startLocalNeon()
    : driver === 'neon-http'
      ? await startNeonHttpEndpointProcess(addedRoundTripMs)
      : undefined;
for (let r = 0; r < rounds; r++) {
  const url = await freshDatabase(server, 'skiplock_probe_burst');
  // Warmed as the bench warms it (the endpoint keeps a pool per connection string: the floor's is the
  // database's, the invocations' carries their application_name), in process or apart.
  const isFloor = mode.startsWith('floor');
  if (neon) await warmNeonHttpEndpoint(neon, isFloor ? url : invocationUrl(url));
  httpRequests.clear();
  if (isFloor) {
    const floor = await measureBurstFloor(url, params, neon?.neon, neon && 'pid' in neon ? neon.pid : undefined);
    console.log(
      `floor (${floor.transport}): ${floor.seconds} s (÷ ideal ${(floor.seconds / floor.idealSeconds).toFixed(2)}), ${floor.statementsPerJob} statements per job, load ${JSON.stringify(floor.load)}`,
    );
    printRequests();
    continue;
  }
  const result = await measureBurstDrain(
    url,
    {
      driver,
      label: driver,
      addedRoundTripMs,
      ...(neon ? { neon: neon.neon } : {}),
      ...(neon && 'pid' in neon ? { endpointPid: neon.pid } : {}),
      // PROBE_ENV='{"SKIPLOCK_BATCH_SIZE":"20"}': more SKIPLOCK_* variables for the function (what is tried).
      ...(process.env.PROBE_ENV ? { env: JSON.parse(process.env.PROBE_ENV) as Record<string, string> } : {}),
    },
    params,
  );
  console.log(
    `${mode}${addedRoundTripMs > 0 ? ` +${addedRoundTripMs} ms` : ''}: ${result.seconds} s (÷ ideal ${(result.seconds / result.idealSeconds).toFixed(2)}), ${result.statementsPerJob} statements per job, load ${JSON.stringify(result.load)}`,
  );
  printRequests();
}
await neon?.close();
process.exit(0);
