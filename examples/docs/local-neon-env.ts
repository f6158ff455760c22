// The deployed entries (and `npx skiplock`) on Neon's local stand-ins, configured by their
// environment alone, as they are on Neon.

// #region entries-on-local-neon
import { createLambdaWorker } from 'skiplock/lambda';
import { lambdaContext, scheduledEvent, startLocalNeon } from 'skiplock/testing';
import { jobs } from './jobs.js';

const local = await startLocalNeon();
const env = {
  DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/test', // trust, md5 or password auth: not SCRAM
  SKIPLOCK_DRIVER: 'neon-ws', // or 'neon-http'
  SKIPLOCK_NEON_WS_PROXY: `127.0.0.1:${local.wsProxyPort}/v1`, // read on neon-ws
  SKIPLOCK_NEON_FETCH_ENDPOINT: local.httpUrl, // read on neon-http
};
const worker = createLambdaWorker(jobs, { env });
console.log(await worker(scheduledEvent(), lambdaContext(30_000)));
await local.close();
// #endregion entries-on-local-neon
