/**
 * Dev probe (issue 41): the per-job Node path of an attempt without a database: 500 Attempts of a
 * no-op async kind started, their ends delivered, their outcomes mapped for a settle — repeated.
 * Prints ns per job (the median of 15 rounds of 200 batches, after 100 unmeasured batches). Build as
 * the other probes (esbuild, .bench/probe-attempt.mjs); run it under the lock.
 */
import * as z from 'zod';
import { defineJob } from '../core/jobs.js';
import { Attempt, type AttemptHost, type PendingOutcome } from '../core/worker/attempt.js';
import { outcomesOf } from '../core/worker/outcome-buffer.js';
import type { Kind, WorkerSettings } from '../core/worker/settings.js';
import { settleParams } from '../db/statements/settle-params.js';

const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
const kind = { definition: noop, handler: noop.handler } as unknown as Kind;
const settings = {
  clock: { now: () => performance.now() },
  tracing: undefined,
  maxResultBytes: 1 << 20,
  breakers: new Map(),
} as unknown as WorkerSettings;
let ended: Attempt[] = [];
let resolveBatch: (() => void) | undefined;
const BATCH = 500;
const host: AttemptHost = {
  settings,
  invocationId: 'x',
  stopAt: 1e12,
  budgetMs: 1e12,
  ended(attempt) {
    ended.push(attempt);
    if (ended.length === BATCH) resolveBatch?.();
  },
};
let next = 1;
function claimed() {
  const jobs = JSON.parse(
    `[${Array.from({ length: BATCH }, () => `["${next++}", "noop", "default", {"n": ${next}}, 0, 1, 25]`).join(', ')}]`,
  ) as unknown[][];
  return jobs.map((t) => ({
    id: t[0] as string,
    kind: t[1] as string,
    queue: t[2] as string,
    payload: t[3],
    priority: t[4] as number,
    attempt: t[5] as number,
    maxAttempts: t[6] as number,
    leaseToken: 'token',
    correlationId: null,
  }));
}
async function batch(): Promise<number> {
  const jobs = claimed();
  const done = new Promise<void>((r) => {
    resolveBatch = r;
  });
  const t = performance.now();
  for (const job of jobs) {
    const a = new Attempt(job, kind, host, undefined, performance.now());
    a.run();
  }
  await done;
  const outs = ended.map((a) => a.end as PendingOutcome);
  ended = [];
  settleParams(outcomesOf(outs));
  return performance.now() - t;
}
for (let i = 0; i < 100; i++) await batch();
const rounds: number[] = [];
for (let r = 0; r < 15; r++) {
  let ms = 0;
  for (let i = 0; i < 200; i++) ms += await batch();
  rounds.push((ms * 1e6) / (200 * BATCH));
}
rounds.sort((a, b) => a - b);
console.log(
  `attempt path: ${rounds[7]?.toFixed(0)} ns per job (min ${rounds[0]?.toFixed(0)}, max ${rounds[14]?.toFixed(0)})`,
);
process.exit(0);
