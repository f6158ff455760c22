/**
 * One chaos worker: a long-lived process that runs worker invocations back to back (like a
 * warm container fired by a scheduler), through the driver under test and its faulty stand-in, sometimes two at once
 * (a duplicate cron tick). It may kill itself mid-claim or mid-commit (right after sending
 * the statement), the job kind may kill it inside or just after a handler, and the stepped kind
 * inside a step or just after one.
 */
import { Client as NeonClient } from '@neondatabase/serverless';
import pg from 'pg';
import { silentLogger } from '../core/logger.js';
import { defineSchedule } from '../core/schedules.js';
import { createWorker, type InvocationStarter } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { chaosBatchedJob, poolBatchHooks } from './batch-job.js';
import { chaosSubscribers } from './events.js';
import { chaosJob, chaosScheduledJob } from './job.js';
import { chaosRuntimeJob } from './runtime-schedules.js';
import { type FaultyConnection, neonOptionsOf } from './stand-ins.js';
import { chaosSteppedJob, poolStepHooks } from './steps-job.js';

interface WorkerConfig {
  /** The driver under test, through the run's faulty stand-in. */
  connection: FaultyConnection;
  /** Observations go straight to Postgres, not through the stand-in. */
  directUrl: string;
  /** The stepped kind's transactional steps (none on neon-http, which has no interactive transactions). */
  transactionalSteps: boolean;
  schema: string;
  invocationMs: number;
  concurrency: number;
  duplicateTickShare: number;
  /** Chance to SIGKILL itself right after sending a claim / a settle. */
  killOnClaim: number;
  killOnSettle: number;
  completedJobs: 'keep' | 'delete';
  /** A cap on running invocations across all processes (0: none), with fan-out and nudges. */
  maxInvocations: number;
  /** Chance a start (fan-out or nudge) is lost, and that it is delivered twice. */
  startDropShare: number;
  startDuplicateShare: number;
}

const config = JSON.parse(process.env.CHAOS_WORKER_CONFIG ?? '{}') as WorkerConfig;
const die = () => process.kill(process.pid, 'SIGKILL');
let tick = 0;
let stopping = false;

// Kill points on the wire: right after a claim or a settle statement has been handed to the socket
// (pg, neon-ws), or over HTTP either just after the request went out or once its answer came back
// (committed, not yet read).
const isClaim = (text: string) => text.includes('for update skip locked') && text.includes('claimed as');
const isSettle = (text: string) => text.includes('lease_token = r.token') && text.includes('jsonb_to_recordset');
const killsAfter = (text: string) =>
  (isClaim(text) && Math.random() < config.killOnClaim) || (isSettle(text) && Math.random() < config.killOnSettle);
if (config.connection.driver === 'neon-http') {
  const originalFetch = globalThis.fetch;
  globalThis.fetch = ((input: Parameters<typeof fetch>[0], init?: RequestInit) => {
    const answer = originalFetch(input, init);
    if (typeof init?.body === 'string' && killsAfter(init.body)) {
      if (Math.random() < 0.5) setTimeout(die, 2);
      else answer.then(die, die);
    }
    return answer;
  }) as typeof fetch;
} else {
  const proto = (config.connection.driver === 'pg' ? pg.Client.prototype : NeonClient.prototype) as {
    query: (...args: unknown[]) => unknown;
  };
  const originalQuery = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const result = originalQuery.apply(this, args);
    const text = typeof args[0] === 'string' ? args[0] : ((args[0] as { text?: string })?.text ?? '');
    if (killsAfter(text)) setImmediate(die);
    return result;
  };
}

// Observations go straight to Postgres, not through the fault proxy.
const direct = new pg.Pool({ connectionString: config.directUrl, max: 4 });
direct.on('error', () => {});
const job = chaosJob({
  record: async (jobId, leaseToken, attempt) => {
    await direct.query(
      `insert into "${config.schema}".chaos_executions (job_id, lease_token, attempt, pid) values ($1, $2, $3, $4)`,
      [jobId, leaseToken, attempt, process.pid],
    );
  },
  die,
  dieSoon: () => setImmediate(die),
});
// The stepped kind: each step function's execution recorded first; it may kill this process inside a
// step, as a step returns, or right after a step's completion was recorded.
const stepped = chaosSteppedJob(
  config.schema,
  poolStepHooks(direct, config.schema, die, () => setImmediate(die)),
  {
    transactional: config.transactionalSteps,
  },
);

// The batch kind: each call recorded first; it may kill this process before or as it answers.
const batched = chaosBatchedJob(poolBatchHooks(direct, config.schema, die, () => setImmediate(die)));

// Every worker ticks the same every-second schedule at every invocation start: each occurrence
// must become one job, whatever the kills, the dropped connections and the concurrent ticks.
const scheduled = chaosScheduledJob(async (occurrence, jobId) => {
  await direct.query(`insert into "${config.schema}".chaos_schedule_runs (occurrence, job_id) values ($1, $2)`, [
    occurrence,
    jobId,
  ]);
});
const schedules = [
  defineSchedule({
    name: 'chaos-every-second',
    cron: '* * * * * *',
    job: scheduled,
    payload: (at) => ({ at: at.toISOString() }),
    missed: 'last',
  }),
];

const db = connect({
  connectionString: config.connection.connectionString,
  driver: config.connection.driver,
  neon: neonOptionsOf(config.connection),
  max: 4,
  statementTimeoutMs: 2_000,
  queryTimeoutMs: 2_500,
  connectionTimeoutMs: 1_000,
});
/** Invocations started out of band (fan-out, nudges), as a platform would start them. */
const started = new Set<Promise<unknown>>();
const MAX_STARTED_PER_PROCESS = 8;
const startInvocation = () => {
  if (stopping || started.size >= MAX_STARTED_PER_PROCESS) return;
  const run = worker
    .runInvocation({ remainingMs: config.invocationMs, invocationId: `${process.pid}-s${tick++}` })
    .finally(() => started.delete(run));
  started.add(run);
};
// A start is a hint: lost or delivered twice at random, as an async Invoke may be.
const starter: InvocationStarter = {
  start: async (count) => {
    for (let i = 0; i < count; i++) {
      if (Math.random() < config.startDropShare) continue;
      startInvocation();
      if (Math.random() < config.startDuplicateShare) startInvocation();
    }
  },
};
const capped = config.maxInvocations > 0;
const worker = createWorker({
  db,
  jobs: [job, scheduled, stepped, batched, ...chaosSubscribers, chaosRuntimeJob(direct, config.schema)],
  schedules,
  scheduleTickMs: 0,
  schema: config.schema,
  concurrency: config.concurrency,
  batchSize: config.concurrency,
  safetyMarginMs: 300,
  leaseGraceMs: 300,
  logger: silentLogger,
  completedJobs: config.completedJobs,
  name: 'chaos',
  maxInvocations: capped ? config.maxInvocations : undefined,
  fanOut: capped ? starter : undefined,
  fanOutTargetMs: 1_000,
});
// A nudge from the harness (after an enqueue): start an invocation, or lose the nudge.
process.on('message', () => void starter.start(1));

process.on('SIGTERM', () => {
  stopping = true;
});
while (!stopping) {
  const ticks = Math.random() < config.duplicateTickShare ? 2 : 1;
  const summaries = await Promise.all(
    Array.from({ length: ticks }, () =>
      worker.runInvocation({ remainingMs: config.invocationMs, invocationId: `${process.pid}-${tick++}` }),
    ),
  );
  if (summaries.every((s) => s.claimed === 0)) await new Promise((resolve) => setTimeout(resolve, 50));
}
await Promise.allSettled([...started]);
await db.close();
await direct.end();
process.exit(0);
