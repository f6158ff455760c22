/**
 * Dev probe: the serverless bench's burst drain alone
 * (`node .bench/probe-burst.mjs [pg|neon-http|neon-http-apart|floor|floor-neon-http] [ROUNDS] [ADDED_RTT_MS]`),
 * the same parameters as `npm run bench:serverless` phase 2, for A/B runs of the small-batch path.
 * neon-http: the SQL-over-HTTP endpoint in this process; neon-http-apart and floor-neon-http: in a
 * process of its own (bench/serverless/neon-endpoint.ts), as the bench runs it. ADDED_RTT_MS: a slow
 * link (the bench's `--rtt`): on pg a delaying proxy, on neon-http-apart the endpoint's own delay.
 */
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
const server = (await resolveTestDatabase()).url;
const neon =
  mode === 'neon-http'
    ? await startLocalNeon()
    : driver === 'neon-http'
      ? await startNeonHttpEndpointProcess(addedRoundTripMs)
      : undefined;
for (let r = 0; r < rounds; r++) {
  const url = await freshDatabase(server, 'skiplock_probe_burst');
  // Warmed as the bench warms it (the endpoint keeps a pool per database), in process or apart.
  if (neon) await warmNeonHttpEndpoint(neon, url);
  if (mode.startsWith('floor')) {
    const floor = await measureBurstFloor(url, params, neon?.neon);
    console.log(
      `floor (${floor.transport}): ${floor.seconds} s (÷ ideal ${(floor.seconds / floor.idealSeconds).toFixed(2)}), ${floor.statementsPerJob} statements per job`,
    );
    continue;
  }
  const result = await measureBurstDrain(
    url,
    { driver, label: driver, addedRoundTripMs, ...(neon ? { neon: neon.neon } : {}) },
    params,
  );
  console.log(
    `${mode}${addedRoundTripMs > 0 ? ` +${addedRoundTripMs} ms` : ''}: ${result.seconds} s (÷ ideal ${(result.seconds / result.idealSeconds).toFixed(2)}), ${result.statementsPerJob} statements per job, load ${JSON.stringify(result.load)}`,
  );
}
await neon?.close();
process.exit(0);
