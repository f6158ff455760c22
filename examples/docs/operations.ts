// The operator's API: replay the DLQ, cancel, read jobs and stats, run the maintenance tick.
import { connect } from 'skiplock';
import { jobs } from './jobs.js';

const db = connect({ connectionString: process.env.DATABASE_URL! });
declare const since: Date;
declare const fixed: { to: string; subject: string };

// #region replay
import { JobRegistry, replay } from 'skiplock';

const registry = new JobRegistry(jobs);
await replay(db, { ids: ['42'], by: 'alice' }); // by id
await replay(db, { kind: 'deliver-webhook', reason: 'http_4xx', since, limit: 500, dryRun: true });
await replay(db, { kind: 'send-email', ids: ['43'], override: { payload: fixed }, registry });
// → { replayed: [{ id, kind, queue, deadReason }], refused: [{ id, state, message }], dryRun }
// #endregion replay
console.log(registry);

// #region admin
import { activity, cancel, expireDeadlines, getJob, listJobs, retryNow, runMaintenance, stats } from 'skiplock';

await cancel(db, ['1842']); // → [{ id, previousState, cancelled }]: queued or running jobs end cancelled
await retryNow(db, ['1907']); // a waiting job (scheduled or retry-waiting) is due now
const job = await getJob(db, '1842'); // the job with its whole history, or null
const dead = await listJobs(db, { state: 'dead', reason: 'http_4xx', limit: 20 }); // newest first
const depth = await stats(db); // per queue and kind: ready, scheduled, retry-waiting, running, dead, …
const recent = await activity(db, { windowSeconds: 300 }); // throughput and error rate over 5 minutes
await expireDeadlines(db); // queued jobs past their deadline → DLQ (deadline_exceeded)
await runMaintenance(db, { completedRetentionMs: 24 * 3_600_000, deadRetentionMs: 30 * 24 * 3_600_000 });
// #endregion admin
console.log(job, dead, depth, recent);
