// `npm run smoke:platforms`: runs a job through every platform runtime this machine has (from npm:
// bun, deno, workerd through miniflare; Node itself) and prints a line each: platform, runtime
// version, driver, ok or the failure, and ms from the enqueue to the job's completion.
// Uses TEST_DATABASE_URL or DATABASE_URL, else the local Postgres on 127.0.0.1:5432 (or an embedded one); the runtimes without TCP reach it
// through the local Neon stand-ins. `--json`: one JSON line per platform instead.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { startLocalNeon } from '../testing/neon-local.js';
import { freePort, resolveTestDatabase } from './local-postgres.js';
import { bundlePlatformApp, bundleWorker } from './platforms/bundle.js';

const run = promisify(execFile);
const repo = fileURLToPath(new URL('..', import.meta.url));
const bin = (name: string) => join(repo, 'node_modules/.bin', name);
const SECRETS = {
  CRON_SECRET: 'cron-secret-0123456789abcdef-0123456789',
  SKIPLOCK_ENQUEUE_TOKEN: 'enqueue-token-0123456789abcdef-0123456789',
  SKIPLOCK_ADMIN_TOKEN: 'admin-token-0123456789abcdef-0123456789',
  SKIPLOCK_SIGNAL_SECRET: 'signal-secret-0123456789abcdef-0123456789',
};

export interface SmokeLine {
  platform: string;
  runtime: string;
  driver: string;
  ok: boolean;
  failure?: string;
  /** From the enqueue to the job's completion, as the database saw it. */
  ms?: number;
}

interface Context {
  url: string;
  neonHttpUrl: string;
  wsProxyPort: number;
  admin: pg.Pool;
  schemaFor(platform: string): Promise<string>;
}

/** Waits for the job's completion (a nudge's run goes on after the enqueue's response). */
async function completion(ctx: Context, schema: string, id: string, started: number, timeoutMs = 20_000) {
  for (;;) {
    const { rows } = await ctx.admin.query(`select state from "${schema}".jobs where id = $1`, [id]);
    if (rows[0]?.state === 'completed') return Math.round(performance.now() - started);
    if (rows[0]?.state === 'dead') throw new Error('the job died');
    if (performance.now() - started > timeoutMs)
      throw new Error(`not completed after ${timeoutMs} ms (${rows[0]?.state})`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** POSTs one job to an app's enqueue route and waits for the nudge's run to complete it. */
async function enqueueThroughRoute(
  ctx: Context,
  schema: string,
  send: (body: string) => Promise<Response>,
): Promise<number> {
  const started = performance.now();
  const response = await send(JSON.stringify({ kind: 'platform-ping', payload: { n: 1 } }));
  if (response.status !== 200) throw new Error(`enqueue answered ${response.status}: ${await response.text()}`);
  const { results } = (await response.json()) as { results: { id: string }[] };
  return completion(ctx, schema, results[0]?.id as string, started);
}

/** A TypeScript runtime running scripts/platforms/core-smoke.ts (Node through tsx, Bun itself). */
async function coreSmoke(ctx: Context, platform: string, command: string[], runtime: string): Promise<SmokeLine> {
  const schema = await ctx.schemaFor(platform);
  const [file, ...args] = command as [string, ...string[]];
  const out = await run(file, [...args, join(repo, 'scripts/platforms/core-smoke.ts')], {
    cwd: repo,
    env: { ...process.env, DATABASE_URL: ctx.url, SKIPLOCK_SCHEMA: schema, SKIPLOCK_DRIVER: 'pg' },
    timeout: 60_000,
  }).then(
    (r) => r.stdout,
    (err: { stdout?: string; stderr?: string; message: string }) => err.stdout || err.stderr || err.message,
  );
  const last = out.trim().split('\n').pop() ?? '';
  try {
    const result = JSON.parse(last) as { ok: boolean; ms?: number; checks: Record<string, boolean> };
    const failed = Object.entries(result.checks)
      .filter(([, passed]) => !passed)
      .map(([name]) => name);
    return {
      platform,
      runtime,
      driver: 'pg',
      ok: result.ok,
      ms: result.ms,
      failure: result.ok ? undefined : `failed: ${failed.join(', ')}`,
    };
  } catch {
    return { platform, runtime, driver: 'pg', ok: false, failure: out.trim().slice(-300) };
  }
}

async function nodeLine(ctx: Context): Promise<SmokeLine> {
  return coreSmoke(ctx, 'node', [bin('tsx')], `node ${process.version.slice(1)}`);
}

async function bunLine(ctx: Context): Promise<SmokeLine | undefined> {
  if (!existsSync(bin('bun'))) return undefined;
  const version = (await run(bin('bun'), ['--version'])).stdout.trim();
  return coreSmoke(ctx, 'bun', [bin('bun'), 'run'], `bun ${version}`);
}

async function workerdLine(ctx: Context): Promise<SmokeLine | undefined> {
  const require = createRequire(import.meta.url);
  let miniflare: typeof import('miniflare');
  try {
    miniflare = await import('miniflare');
  } catch {
    return undefined;
  }
  const version = (JSON.parse(readFileSync(require.resolve('workerd/package.json'), 'utf8')) as { version: string })
    .version;
  const line = { platform: 'cloudflare', runtime: `workerd ${version}`, driver: 'neon-http' };
  const schema = await ctx.schemaFor('cloudflare');
  await ctx.admin.query(
    `create table if not exists "${schema}".platform_orders (id serial primary key, n int not null)`,
  );
  const bundle = await bundleWorker(join(repo, 'test/fixtures/platforms/wrangler.jsonc'));
  const mf = new miniflare.Miniflare({
    name: 'skiplock-smoke',
    modules: true,
    script: bundle.code,
    compatibilityDate: '2025-09-01',
    compatibilityFlags: ['nodejs_compat'],
    bindings: {
      DATABASE_URL: ctx.url,
      SKIPLOCK_SCHEMA: schema,
      SKIPLOCK_LOG_LEVEL: 'error',
      SKIPLOCK_NEON_FETCH_ENDPOINT: ctx.neonHttpUrl,
      SKIPLOCK_NUDGE_ROUTES: '*=/skiplock/worker',
      ...SECRETS,
    },
    serviceBindings: { SKIPLOCK_SELF: 'skiplock-smoke' },
  });
  try {
    await mf.ready;
    const ms = await enqueueThroughRoute(ctx, schema, async (body) => {
      const response = await mf.dispatchFetch('http://localhost/skiplock/enqueue', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}` },
        body,
      });
      return response as unknown as Response;
    });
    return { ...line, ok: true, ms };
  } catch (err) {
    return { ...line, ok: false, failure: (err as Error).message };
  } finally {
    await mf.dispose().catch(() => {});
  }
}

/** Waits until `port` accepts connections (a child process started its server). */
async function listening(port: number, child: ChildProcess, timeoutMs = 20_000): Promise<void> {
  const started = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}`);
    const ok = await fetch(`http://127.0.0.1:${port}/skiplock/none`).then(
      () => true,
      () => false,
    );
    if (ok) return;
    if (Date.now() - started > timeoutMs) throw new Error(`not listening on ${port} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Runs the Deno app (test/fixtures/platforms/deno-app.ts, bundled) with `deno run`. */
export async function startDenoApp(
  env: Record<string, string>,
  fixture = 'deno-app.ts',
): Promise<{ origin: string; stop(): Promise<void> }> {
  const bundle = await bundlePlatformApp(join(repo, 'test/fixtures/platforms', fixture));
  const dir = mkdtempSync(join(tmpdir(), 'skiplock-deno-'));
  const file = join(dir, 'app.mjs');
  writeFileSync(file, bundle.code);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const child = spawn(bin('deno'), ['run', '--allow-net', '--allow-env', '--allow-read', '--no-prompt', file], {
    env: { ...process.env, ...env, PORT: String(port), SKIPLOCK_BASE_URL: origin, DENO_NO_UPDATE_CHECK: '1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const stop = async () => {
    child.kill();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await listening(port, child);
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}: ${stderr.slice(-500)}`);
  }
  return { origin, stop };
}

async function denoLine(ctx: Context): Promise<SmokeLine | undefined> {
  if (!existsSync(bin('deno'))) return undefined;
  const version = (await run(bin('deno'), ['--version'])).stdout
    .split('\n')[0]
    ?.replace(/^deno\s+/, '')
    .split(' ')[0];
  const line = { platform: 'deno', runtime: `deno ${version}`, driver: 'neon-http' };
  const schema = await ctx.schemaFor('deno');
  let app: Awaited<ReturnType<typeof startDenoApp>> | undefined;
  try {
    app = await startDenoApp({
      DATABASE_URL: ctx.url,
      SKIPLOCK_DRIVER: 'neon-http',
      SKIPLOCK_SCHEMA: schema,
      SKIPLOCK_LOG_LEVEL: 'error',
      SKIPLOCK_NEON_FETCH_ENDPOINT: ctx.neonHttpUrl,
      SKIPLOCK_NUDGE_ROUTES: '*=/skiplock/worker',
      ...SECRETS,
    });
    const origin = app.origin;
    const ms = await enqueueThroughRoute(ctx, schema, (body) =>
      fetch(`${origin}/skiplock/enqueue`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}` },
        body,
      }),
    );
    return { ...line, ok: true, ms };
  } catch (err) {
    return { ...line, ok: false, failure: (err as Error).message };
  } finally {
    await app?.stop();
  }
}

export const PLATFORMS = { node: nodeLine, bun: bunLine, cloudflare: workerdLine, deno: denoLine } as const;

/** Runs every platform whose runtime is installed, one after another (they share the machine). */
export async function smokePlatforms(only?: readonly string[]): Promise<SmokeLine[]> {
  const database = await resolveTestDatabase();
  const neon = await startLocalNeon();
  const admin = new pg.Pool({ connectionString: database.url, max: 2 });
  admin.on('error', () => {}); // a connection ended by the server while idle: the pool drops it
  const schemas: string[] = [];
  const suffix = (process.env.SKIPLOCK_TEST_RUN ?? String(process.pid)).replace(/\W/g, '_');
  const ctx: Context = {
    url: database.url,
    neonHttpUrl: neon.httpUrl,
    wsProxyPort: neon.wsProxyPort,
    admin,
    async schemaFor(platform) {
      const schema = `smoke_${platform}_${suffix}`.toLowerCase();
      await admin.query(`drop schema if exists "${schema}" cascade`);
      const db = connect({ connectionString: database.url });
      try {
        await migrate(db, { schema });
      } finally {
        await db.close();
      }
      schemas.push(schema);
      return schema;
    },
  };
  const lines: SmokeLine[] = [];
  try {
    for (const [name, line] of Object.entries(PLATFORMS)) {
      if (only && !only.includes(name)) continue;
      const result = await line(ctx).catch(
        (err: Error): SmokeLine => ({ platform: name, runtime: '?', driver: '?', ok: false, failure: err.message }),
      );
      if (result) lines.push(result);
    }
  } finally {
    for (const schema of schemas) await admin.query(`drop schema if exists "${schema}" cascade`);
    await admin.end();
    await neon.close();
    await database.stop();
  }
  return lines;
}

export function formatLine(line: SmokeLine): string {
  const outcome = line.ok ? 'ok' : `FAILED ${line.failure ?? ''}`.trim();
  const ms = line.ms === undefined ? '-' : `${line.ms} ms`;
  return [line.platform.padEnd(11), line.runtime.padEnd(22), line.driver.padEnd(10), outcome.padEnd(6), ms].join(' ');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const json = process.argv.includes('--json');
  const only = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  const lines = await smokePlatforms(only.length > 0 ? only : undefined);
  for (const line of lines) console.log(json ? JSON.stringify(line) : formatLine(line));
  process.exit(lines.every((l) => l.ok) ? 0 : 1);
}
