// A worker in your own scheduled function, straight on the core API (the skiplock/lambda and
// skiplock/vercel entries do this for you, configured from the environment).

// #region create-worker
import { connect, createWorker } from 'skiplock';
import { jobs } from './jobs.js';

const db = connect({ connectionString: process.env.DATABASE_URL!, driver: 'neon-ws' });
const worker = createWorker({ db, jobs, concurrency: 10 });

// e.g. in a scheduled Lambda:
export const handler = async (_event: unknown, context: { getRemainingTimeInMillis(): number }) =>
  worker.runInvocation({ remainingMs: context.getRemainingTimeInMillis() });
// → { invocationId, claimed, completed, retried, dead, cancelled, released, leaseLost, durationMs, stoppedBecause }
// #endregion create-worker
