/**
 * The `batch_handler` phase of `npm run bench`: jobs per second through a batch handler of 100
 * against one job per handler call, on one worker invocation loop (concurrency 10, the same for
 * both), with two handlers:
 *
 * - `noop`: the handler does nothing (single: returns; batch: `jobs.map((j) => j.done())`). What
 *   the worker itself costs per job either way.
 * - `bulk_api`: the handler calls a simulated bulk API — a mail, analytics or search-indexing
 *   endpoint that takes many items per request — costing BULK_API.fixedMs per request plus
 *   BULK_API.perItemMs per item (a timer; no network). One job per call pays the fixed cost per job;
 *   a batch of 100 pays it once for 100.
 *
 * Each measurement starts on an empty jobs table with N queued jobs and ends when all completed.
 * pg-boss runs the same handlers beside it, with its own batch handler (bench/batch-handler-pgboss.ts),
 * the four measurements of a repetition alternating their order.
 */
import { sql } from 'drizzle-orm';
import * as z from 'zod';
import { defineBatchJob } from '../core/batches.js';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob, type JobDefinition } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { type PgBossHandler, pgBossMeasurer, pgBossSettings } from './batch-handler-pgboss.js';
import { ratio } from './report-format.js';

/** The simulated bulk API: a request's round trip and each item's share of its work. */
export const BULK_API = { fixedMs: 20, perItemMs: 0.1 } as const;
const CONCURRENCY = 10;
const BATCH_SIZE = 100;

const payload = z.object({ n: z.number() });
const callApi = (items: number) =>
  new Promise<void>((resolve) => setTimeout(resolve, BULK_API.fixedMs + BULK_API.perItemMs * items));

const kinds = {
  noop: {
    single: defineJob({ kind: 'single', payload, handler: async () => {} }),
    batch: defineBatchJob({
      kind: 'batch',
      payload,
      batch: { size: BATCH_SIZE },
      handler: async (jobs) => jobs.map((j) => j.done()),
    }),
  },
  bulk_api: {
    single: defineJob({ kind: 'single', payload, handler: () => callApi(1) }),
    batch: defineBatchJob({
      kind: 'batch',
      payload,
      batch: { size: BATCH_SIZE },
      handler: async (jobs) => {
        await callApi(jobs.length);
        return jobs.map((j) => j.done());
      },
    }),
  },
};

/** pg-boss's handlers: the same work, in its handler shape (a batch answers for each job). */
const completeEach = (jobs: { id: string }[]) => jobs.map((j) => ({ id: j.id, status: 'completed' as const }));
const pgBossHandlers: Record<Handler, Record<Mode, PgBossHandler>> = {
  noop: { single: async () => {}, batch: async (jobs) => completeEach(jobs) },
  bulk_api: {
    single: () => callApi(1),
    batch: async (jobs) => {
      await callApi(jobs.length);
      return completeEach(jobs);
    },
  },
};

type Handler = 'noop' | 'bulk_api';
type Mode = 'single' | 'batch';
/** Jobs per second one job per call, in batches, and batch ÷ single. */
export interface ModeFigures {
  single: number;
  batch: number;
  ratio: number;
}

export interface BatchHandlerFigures {
  concurrency: number;
  batchSize: number;
  bulkApi: typeof BULK_API;
  jobs: { noop: number; bulk_api: number };
  /** skiplock, jobs per second. */
  noop: ModeFigures;
  bulk_api: ModeFigures;
  /** pg-boss with the same handlers (absent from runs before it was measured). */
  pgboss?: { settings: ReturnType<typeof pgBossSettings>; noop: ModeFigures; bulk_api: ModeFigures };
}

/** Runs the phase on `url` (a fresh database). `jobs`: how many per measurement, by handler. */
export async function runBatchHandlerBench(options: {
  url: string;
  jobs: { noop: number; bulk_api: number };
  reps: number;
  log: (line: string) => void;
}): Promise<BatchHandlerFigures> {
  const db = connect({ connectionString: options.url, max: 2 });
  await migrate(db);
  const enqueuer = createEnqueuer();
  // biome-ignore lint/suspicious/noExplicitAny: kinds of either handler shape.
  const measure = async (kind: JobDefinition<any, any>, n: number): Promise<number> => {
    await db.db.execute(sql`truncate skiplock.jobs`);
    for (let from = 0; from < n; from += 1_000) {
      const count = Math.min(1_000, n - from);
      await enqueuer.enqueueMany(
        db,
        Array.from({ length: count }, (_, i) => kind.with({ n: from + i })),
      );
    }
    const worker = createWorker({ db, jobs: [kind], concurrency: CONCURRENCY, logger: silentLogger });
    const started = performance.now();
    let completed = 0;
    while (completed < n) {
      const summary = await worker.runInvocation({ remainingMs: 600_000 });
      completed += summary.completed;
      if (summary.claimed === 0) throw new Error(`batch_handler: ${n - completed} jobs never completed`);
    }
    return Math.round(n / ((performance.now() - started) / 1000));
  };
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  const figuresOf = (runs: Record<Mode, number[]>): ModeFigures => {
    const single = median(runs.single);
    const batch = median(runs.batch);
    return { single, batch, ratio: Math.round((batch / single) * 10) / 10 };
  };
  const empty = { single: 0, batch: 0, ratio: 0 };
  const figures = { noop: { ...empty }, bulk_api: { ...empty } };
  const peer = { noop: { ...empty }, bulk_api: { ...empty } };
  const boss = await pgBossMeasurer(options.url, CONCURRENCY);
  try {
    for (const handler of ['noop', 'bulk_api'] as const) {
      const n = options.jobs[handler];
      const runs = { single: [] as number[], batch: [] as number[] };
      const peerRuns = { single: [] as number[], batch: [] as number[] };
      const steps: (() => Promise<void>)[] = (['single', 'batch'] as const).flatMap((mode) => [
        async () => {
          runs[mode].push(await measure(kinds[handler][mode], n));
        },
        async () => {
          peerRuns[mode].push(await boss.measure(pgBossHandlers[handler][mode], mode === 'batch' ? BATCH_SIZE : 1, n));
        },
      ]);
      for (let rep = 0; rep < options.reps; rep++) {
        // Alternate the order between repetitions.
        for (const step of rep % 2 === 0 ? steps : [...steps].reverse()) await step();
      }
      figures[handler] = figuresOf(runs);
      peer[handler] = figuresOf(peerRuns);
      for (const [name, f] of [
        ['skiplock', figures[handler]],
        ['pg-boss', peer[handler]],
      ] as const)
        options.log(
          `  ${handler}, ${name}: one job per call ${f.single} jobs/s, batch of ${BATCH_SIZE} ${f.batch} jobs/s (×${f.ratio})`,
        );
    }
  } finally {
    await boss.close();
    await db.close();
  }
  return {
    concurrency: CONCURRENCY,
    batchSize: BATCH_SIZE,
    bulkApi: BULK_API,
    jobs: options.jobs,
    ...figures,
    pgboss: { settings: pgBossSettings(CONCURRENCY, BATCH_SIZE), ...peer },
  };
}

/** The phase's section of bench/RESULTS.md; pg-boss's columns when the run measured it. */
export function batchHandlerSection(f: BatchHandlerFigures): string {
  const fmt = (n: number) => n.toLocaleString('en-US');
  const peer = f.pgboss;
  const cells = (m: ModeFigures) => `${fmt(m.single)} | ${fmt(m.batch)} | ${m.ratio}×`;
  const row = (label: string, handler: Handler) =>
    peer
      ? `| ${label} | ${cells(f[handler])} | ${cells(peer[handler])} | ${ratio(f[handler].single, peer[handler].single)} / ${ratio(f[handler].batch, peer[handler].batch)} |`
      : `| ${label} | ${cells(f[handler])} |`;
  const head = peer
    ? `| handler | skiplock, one job per call | skiplock, batch of ${f.batchSize} | ratio | pg-boss, one job per call | pg-boss, batch of ${f.batchSize} | ratio | skiplock ÷ pg-boss, one per call / batch |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |`
    : `| handler | one job per call, jobs/s | batch of ${f.batchSize}, jobs/s | ratio |
| --- | ---: | ---: | ---: |`;
  const peerText = peer
    ? ` pg-boss runs the same handlers with its own batch handler (\`work(name, { batchSize }, handler)\` hands it an array): one job per call is \`batchSize: 1\`, a batch \`batchSize: ${f.batchSize}\` with \`perJobResults\` (the handler answers for each job, as a skiplock batch handler does); \`localConcurrency: ${peer.settings.work.localConcurrency}\`, and \`burstWhenReadyExceeds\` beside \`burstWhenBatchFull\` so that a worker with a backlog fetches again at once rather than after its polling interval (bench/batch-handler-pgboss.ts). Jobs/s in every column.`
    : '';
  return `## Batch handler

Jobs per second through one worker invocation loop (concurrency ${f.concurrency}, each slot one handler call), a batch handler of ${f.batchSize} against one job per call, each measured from ${fmt(f.jobs.noop)} (no-op) or ${fmt(f.jobs.bulk_api)} (bulk API) queued jobs to the last completion (bench/batch-handler.ts; \`npm run bench -- --batch-only\` runs only this phase). The bulk API is simulated: ${f.bulkApi.fixedMs} ms per request plus ${f.bulkApi.perItemMs} ms per item, as a mail, analytics or search-indexing endpoint that takes many items per request. A batch kind's claims also ask for ${f.batchSize} jobs per free slot where one job per call's ask for one per free slot (${f.concurrency} at most): the no-op row measures the claims' size as much as the handler calls.${peerText}

${head}
${row('no-op', 'noop')}
${row('bulk API', 'bulk_api')}
`;
}
