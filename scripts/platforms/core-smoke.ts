// The driver smoke set in one script, for runtimes that run the package as Node does (Bun runs this
// file itself, TypeScript and tsconfig paths included; Node runs it through tsx): migrate, enqueue in
// the caller's transaction (and a rolled-back one that leaves nothing), one worker invocation,
// a dead job replayed and run again, a signal that wakes a waiting job. Prints one JSON line.
// Environment: DATABASE_URL, SKIPLOCK_SCHEMA, SKIPLOCK_DRIVER (pg | neon-ws | neon-http) and, on the
// Neon drivers, SKIPLOCK_NEON_WS_PROXY / SKIPLOCK_NEON_FETCH_ENDPOINT.
import { sql } from 'drizzle-orm';
import { connect, createEnqueuer, createWorker, migrate, replay, silentLogger } from 'skiplock';
import { alwaysFails, approval, ping } from '../../test/fixtures/platforms/jobs.js';

type Driver = 'pg' | 'neon-ws' | 'neon-http';
const driver = (process.env.SKIPLOCK_DRIVER ?? 'pg') as Driver;
const schema = process.env.SKIPLOCK_SCHEMA ?? 'skiplock_smoke';
const wsProxy = process.env.SKIPLOCK_NEON_WS_PROXY;
const fetchEndpoint = process.env.SKIPLOCK_NEON_FETCH_ENDPOINT;
const db = connect({
  connectionString: process.env.DATABASE_URL as string,
  driver,
  neon:
    driver === 'pg'
      ? undefined
      : {
          wsProxy: wsProxy ? (host, port) => `${wsProxy}?address=${host}:${port}` : undefined,
          useSecureWebSocket: false,
          pipelineTLS: false,
          pipelineConnect: false,
          coalesceWrites: false,
          fetchEndpoint,
        },
});
const jobs = [ping, alwaysFails, approval];
const worker = createWorker({ db, schema, jobs, logger: silentLogger });
const run = () => worker.runInvocation({ remainingMs: 20_000 });
const stateOf = async (id: string) => {
  const rows = (await db.db.execute(
    sql`select state, attempt, result from ${sql.identifier(schema)}.jobs where id = ${id}`,
  )) as unknown as { rows: { state: string; attempt: number; result: unknown }[] };
  return rows.rows[0];
};
const { enqueue, signal } = createEnqueuer({ schema });

const checks: Record<string, boolean> = {};
let ms: number | undefined;
try {
  await migrate(db, { schema });
  await db.db.execute(sql`create table if not exists ${sql.identifier(schema)}.smoke_orders (n int not null)`);

  // Enqueue in the caller's transaction; on neon-http, whose driver has none, in a batch.
  const started = performance.now();
  let id: string;
  if (db.interactiveTransactions) {
    const result = await db.db.transaction(async (tx) => {
      await tx.execute(sql`insert into ${sql.identifier(schema)}.smoke_orders (n) values (1)`);
      return enqueue(tx, ping, { n: 1 });
    });
    id = result.id as string;
    // A rolled-back transaction leaves no job.
    const before = (await db.db.execute(
      sql`select count(*)::int as n from ${sql.identifier(schema)}.jobs`,
    )) as unknown as {
      rows: { n: number }[];
    };
    await db.db
      .transaction(async (tx) => {
        await enqueue(tx, ping, { n: 2 });
        throw new Error('rolled back');
      })
      .catch(() => {});
    const after = (await db.db.execute(
      sql`select count(*)::int as n from ${sql.identifier(schema)}.jobs`,
    )) as unknown as {
      rows: { n: number }[];
    };
    checks.rollbackLeavesNoJob = after.rows[0]?.n === before.rows[0]?.n;
  } else {
    id = (await enqueue(db, ping, { n: 1 })).id as string;
  }
  await run();
  const done = await stateOf(id);
  ms = Math.round(performance.now() - started);
  checks.ran = done?.state === 'completed' && (done.result as { doubled?: number })?.doubled === 2;

  const dead = (await enqueue(db, alwaysFails, { why: 'smoke' })).id as string;
  await run();
  checks.dead = (await stateOf(dead))?.state === 'dead';
  const replayed = await replay(db, { schema, ids: [dead] });
  checks.replayed = replayed.replayed.length === 1 && (await stateOf(dead))?.state === 'queued';
  // It runs again and fails again: dead once more (a replay starts its attempts over).
  const rerun = await run();
  const again = await stateOf(dead);
  checks.ranAgain = rerun.claimed === 1 && again?.state === 'dead' && again.attempt === 1;

  const waiting = (await enqueue(db, approval, { order: 'smoke' })).id as string;
  await run();
  await signal(db, 'approve:smoke', { approved: true });
  await run();
  const signalled = await stateOf(waiting);
  checks.signalled = signalled?.state === 'completed';
} catch (err) {
  checks.error = false;
  console.error(err);
} finally {
  await db.close();
}
const ok = Object.values(checks).every(Boolean) && Object.keys(checks).length > 0;
console.log(JSON.stringify({ ok, driver, ms, checks }));
process.exit(ok ? 0 : 1);
