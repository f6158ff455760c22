/**
 * Dev probe (issue 41): one invocation over a slow link, the load-robust half of the burst
 * (`node .bench/probe-slowlink.mjs [pg|neon-http] [ADDED_RTT_MS] [ROUNDS]`). JOBS jobs of 100 ms
 * (a real timer), concurrency 10, one invocation — one twentieth of the burst's CPU, so a busy
 * machine stretches it far less — over a delaying TCP proxy (pg) or the SQL-over-HTTP endpoint in
 * a process of its own with the same delay (neon-http). Prints the drain over its ideal (JOBS ×
 * 100 ms ÷ 10) and the statements per job the database committed.
 */
import { setTimeout as wait } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import * as z from 'zod';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { freshDatabase, withClient } from './db.js';
import { seedBurst } from './serverless/burst.js';
import {
  serveNeonHttpEndpointIfAsked,
  startNeonHttpEndpointProcess,
  warmNeonHttpEndpoint,
} from './serverless/neon-endpoint.js';
import { startSlowLink } from './serverless/slow-link.js';

await serveNeonHttpEndpointIfAsked();

const driver = process.argv[2] === 'neon-http' ? 'neon-http' : 'pg';
const addedRoundTripMs = Number(process.argv[3] ?? 20);
const rounds = Number(process.argv[4] ?? 1);
const JOBS = 1_000;
const JOB_MS = 100;
const CONCURRENCY = 10;

const server = (await resolveTestDatabase()).url;
const neon = driver === 'neon-http' ? await startNeonHttpEndpointProcess(addedRoundTripMs) : undefined;
const job = defineJob({
  kind: 'burst',
  payload: z.object({ n: z.number() }),
  timeoutMs: 10_000,
  handler: () => wait(JOB_MS),
});
const commits = (url: string) =>
  withClient(url, async (c) =>
    Number(
      (await c.query('select xact_commit::bigint as n from pg_stat_database where datname = current_database()'))
        .rows[0].n,
    ),
  );
for (let r = 0; r < rounds; r++) {
  const url = await freshDatabase(server, 'skiplock_probe_slowlink');
  await seedBurst(url, job, JOBS);
  if (neon) await warmNeonHttpEndpoint(neon, url, 5, 10);
  const link = neon ? undefined : await startSlowLink(url, addedRoundTripMs);
  const db = connect({ connectionString: link ? link.url(url) : url, driver, max: 5, neon: neon?.neon });
  await db.executor.query(sql`select 1`); // the pool's first connection
  const before = await commits(url);
  const t0 = performance.now();
  const summary = await createWorker({ db, jobs: [job], concurrency: CONCURRENCY, logger: silentLogger }).runInvocation(
    {
      remainingMs: 120_000,
    },
  );
  const seconds = (performance.now() - t0) / 1000;
  await wait(1_500); // backends report their counts at most once a second
  const statements = (await commits(url)) - before - 1;
  await db.close();
  await link?.close();
  const ideal = (JOBS * JOB_MS) / 1000 / CONCURRENCY;
  console.log(
    `slowlink ${driver} +${addedRoundTripMs} ms: ${seconds.toFixed(2)} s (÷ ideal ${(seconds / ideal).toFixed(2)}), ${(statements / JOBS).toFixed(3)} statements per job, completed ${summary.completed}`,
  );
}
await neon?.close();
process.exit(0);
