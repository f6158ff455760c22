/**
 * A 1-step job's time in pieces (issue 41): handler start → the step's body starts (the read of the
 * steps + lease extension) → the step resolves (its record). `node .bench/probe-step1.mjs [reps] [n]`.
 */
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { freshDatabase } from './db.js';

const reps = Number(process.argv[2] ?? 40);
const n = Number(process.argv[3] ?? 1);
const marks: number[] = [];
let t0 = 0;
const job = defineJob({
  kind: 'p',
  payload: z.object({ durable: z.boolean() }),
  handler: async ({ durable }, ctx) => {
    t0 = performance.now();
    for (let i = 0; i < n; i++) {
      if (durable)
        await ctx.step(`s${i}`, async () => {
          marks.push(performance.now());
        });
      else marks.push(performance.now());
    }
    marks.push(performance.now());
  },
});
const database = await resolveTestDatabase();
const url = await freshDatabase(database.url, 'bench_probe');
const admin = connect({ connectionString: url, max: 1 });
await migrate(admin);
const db = connect({ connectionString: url, max: 2 });
const worker = createWorker({ db, jobs: [job], logger: silentLogger });
const enq = createEnqueuer();
const rows: { durable: boolean; first: number; rest: number; total: number }[] = [];
for (let r = -5; r < reps; r++) {
  for (const durable of r % 2 ? [true, false] : [false, true]) {
    marks.length = 0;
    await enq.enqueueMany(admin, [job.with({ durable })]);
    const s = await worker.runInvocation({ remainingMs: 60_000 });
    if (s.completed !== 1) throw new Error(JSON.stringify(s));
    if (r < 0) continue;
    const first = (marks[0] as number) - t0;
    const end = marks.at(-1) as number;
    rows.push({ durable, first, rest: end - (marks[0] as number), total: end - t0 });
  }
}
const med = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] as number;
for (const durable of [true, false]) {
  const sel = rows.filter((x) => x.durable === durable);
  console.log(
    `${durable ? 'durable' : 'direct '} n=${n}: to first body ${med(sel.map((x) => x.first)).toFixed(3)} ms, body→end ${med(sel.map((x) => x.rest)).toFixed(3)}, total ${med(sel.map((x) => x.total)).toFixed(3)}`,
  );
}
await db.close();
await admin.close();
