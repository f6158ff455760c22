import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { build } from 'esbuild';
import pg from 'pg';
import { pause, resume, setLimit } from '../core/controls.js';
import { createEnqueuer } from '../core/enqueue.js';
import type { EnqueueOptions } from '../core/enqueue-options.js';
import { syncSubscriptions } from '../core/events.js';
import { JobRegistry } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect, type Driver } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import {
  type BatchCheck,
  batchedPlan,
  batchFailed,
  batchLine,
  chaosBatchedJob,
  checkBatches,
  createBatchTables,
  drawBatchWant,
  poolBatchHooks,
} from './batch-job.js';
import { type CheckResult, checkRun, LIMITED, PAUSED_QUEUE, runFailed } from './checker.js';
import {
  chaosSubscribers,
  checkEvents,
  createEventTables,
  type EventCheck,
  eventPublisher,
  eventsLine,
} from './events.js';
import { chaosJob, drawBehavior, SCHEDULED_KIND } from './job.js';
import { liveEnqueuer, liveReplayer } from './live.js';
import { RUNTIME_KIND, type RuntimeScheduleCheck, runtimeScheduleChaos } from './runtime-schedules.js';
import { signalSender } from './signals.js';
import { chaosFaults, type StandIn, startStandIn } from './stand-ins.js';
import {
  chaosSteppedJob,
  drawStepBehavior,
  poolStepHooks,
  signalKey,
  steppedPlan,
  TRANSACTIONAL_STEPS,
} from './steps-job.js';
import { createChaosTables } from './tables.js';

export interface ChaosOptions {
  /** The driver the workers, the signals, the live enqueues and the replays go through. @defaultValue 'pg' */
  driver?: Driver;
  jobs: number;
  processes: number;
  /** Kills to reach (SIGKILL from outside plus the ones the job kinds and wire hooks inflict). */
  targetKills: number;
  /** Mean time between outside kills while work remains. */
  killIntervalMs: number;
  /** Connection faults (pg, neon-ws): chance per open connection per 100 ms. */
  faultChancePerTick: number;
  halfOpenShare: number;
  /** Chance a worker kills itself right after sending a claim / a settle. */
  killOnClaim: number;
  killOnSettle: number;
  duplicateTickShare: number;
  concurrency: number;
  invocationMs: number;
  /** Faults stop at this point even if work remains; then the queue is drained cleanly. */
  faultPhaseLimitMs: number;
  /** The workers' completedJobs mode. @defaultValue 'keep' */
  completedJobs?: 'keep' | 'delete';
  /**
   * A cap on running invocations across the worker processes (0: none). With it, workers fan out
   * and the harness nudges them; every start is dropped or duplicated at random. @defaultValue 0
   */
  maxInvocations?: number;
  /** One job in this many (n % it = 11) is of the batch kind; 0: none. @defaultValue 16 */
  batchedEvery?: number;
  /** One job in this many is stepped (a power of two ≥ 4). @defaultValue 16 */
  steppedEvery?: number;
  /** Chance a start (fan-out or nudge) is lost / delivered twice. @defaultValue 0.2 / 0.2 */
  startDropShare?: number;
  startDuplicateShare?: number;
  /**
   * Jobs enqueued through the driver under test while the faults are on, by every enqueue path, as a
   * share of `jobs`. @defaultValue 0.1
   */
  liveShare?: number;
  /** Dead jobs replayed through the driver under test (the run goes on until 3 were). @defaultValue 20 */
  replays?: number;
  /**
   * Multiplies the chances of the statement faults (refused, dropped, answers lost, slow, never
   * answered): a short run needs more of them to meet each. @defaultValue 1
   */
  statementFaultScale?: number;
  databaseUrl?: string;
  keepSchema?: boolean;
  progress?: (line: string) => void;
}

export const QUICK: ChaosOptions = {
  jobs: 10_000,
  processes: 4,
  targetKills: 40,
  killIntervalMs: 250,
  faultChancePerTick: 0.03,
  halfOpenShare: 0.3,
  killOnClaim: 0.002,
  killOnSettle: 0.002,
  duplicateTickShare: 0.1,
  concurrency: 10,
  invocationMs: 3_000,
  faultPhaseLimitMs: 60_000,
};

export const FULL: ChaosOptions = {
  ...QUICK,
  jobs: 50_000,
  processes: 8,
  targetKills: 220,
  killIntervalMs: 120,
  faultPhaseLimitMs: 420_000,
};

export interface ChaosReport {
  driver: Driver;
  schema: string;
  line: string;
  detail: string;
  result: CheckResult;
  /** Every publish fanned out to every subscriber once (chaos/events.ts). */
  events: EventCheck;
  /** The batch kind's jobs, checked per job (chaos/batch-job.ts), and its summary line. */
  batches: BatchCheck;
  batchLine: string;
  /** The run-time schedules' occurrences: each one job, none missing. */
  runtimeSchedules: RuntimeScheduleCheck;
  kills: number;
  connFaults: number;
  durationMs: number;
  failed: boolean;
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const started = Date.now();
  const driver = options.driver ?? 'pg';
  const transactional = driver !== 'neon-http';
  const say = options.progress ?? (() => {});
  const database = options.databaseUrl
    ? { url: options.databaseUrl, stop: async () => {} }
    : await resolveTestDatabase();
  const schema = `chaos_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Pool({ connectionString: database.url, max: 4 });
  admin.on('error', () => {});
  const direct = connect({ connectionString: database.url, max: 4 });
  const bundleDir = mkdtempSync(join(tmpdir(), 'skiplock-chaos-'));
  const children = new Set<ChildProcess>();
  let standIn: StandIn | undefined;
  const closers: (() => Promise<void>)[] = [];
  let signalling = false;
  try {
    await migrate(direct, { schema });
    await createChaosTables(admin, schema);
    // The events' subscriptions, written as `skiplock sync` writes them at deploy.
    await createEventTables(admin, schema);
    await syncSubscriptions(direct, new JobRegistry(chaosSubscribers), { schema });
    await createBatchTables(admin, schema);
    await admin.query(`insert into "${schema}".chaos_run (driver, transactional_steps) values ($1, $2)`, [
      driver,
      transactional ? TRANSACTIONAL_STEPS : [],
    ]);

    // Enqueue, recording each id in the same transaction: committed ⇔ recorded. A quarter of the
    // jobs go to the queue the run pauses and resumes.
    const enqueuer = createEnqueuer({ schema });
    const recorder = chaosJob({ record: async () => {}, die: () => {}, dieSoon: () => {} });
    // One job in steppedEvery (16; all of the plain 'chaos' queue) is stepped; half of those wait for
    // a signal. The kind as this process runs it (the drain below): recorded on `admin`, never dying.
    const stepped = chaosSteppedJob(
      schema,
      poolStepHooks(
        admin,
        schema,
        () => {},
        () => {},
      ),
      { transactional },
    );
    const planOf = (n: number) => steppedPlan(n, options.steppedEvery ?? 16);
    // One job in sixteen (n % 16 = 11: the plain 'chaos' queue, no key, no parents) is of the batch kind.
    const batched = chaosBatchedJob(
      poolBatchHooks(
        admin,
        schema,
        () => {},
        () => {},
      ),
    );
    const request = (n: number, enqueueOptions: EnqueueOptions) => {
      const plan = planOf(n);
      if (options.batchedEvery !== 0 && batchedPlan(n, options.batchedEvery))
        return batched.with({ n, want: drawBatchWant(Math.random) }, enqueueOptions);
      return plan.stepped
        ? stepped.with({ n, ...drawStepBehavior(Math.random), signal: plan.signal }, enqueueOptions)
        : recorder.with({ n, behavior: drawBehavior(Math.random) }, enqueueOptions);
    };
    // Another quarter carry one of 500 ordering keys (a run of 50,000: 25 jobs in a row per key), and
    // a quarter go to a queue with a limit and a per-key limit, set at run time (8 keys).
    const queueOf = (n: number) => (n % 4 === 0 ? PAUSED_QUEUE : n % 4 === 2 ? LIMITED.queue : 'chaos');
    const keyOf = (n: number) => (n % 4 === 1 ? `key-${n % 2000}` : undefined);
    const tenantOf = (n: number) => (n % 4 === 2 ? `tenant-${n % LIMITED.keys}` : undefined);
    // An eighth wait for two earlier jobs of their batch (one plain, one with an ordering key), a
    // sixteenth of all runs even when one of them dies; each batch is one flow (one statement).
    const parentsOf = (n: number, from: number) => (n % 8 === 7 && n - 6 >= from ? [n - 4, n - 6] : undefined);
    const runAnyway = (n: number) => n % 16 === 15;
    await setLimit(direct, { queue: LIMITED.queue }, LIMITED.maxRunning, { schema, by: 'chaos' });
    await setLimit(direct, { queue: LIMITED.queue, perKey: true }, LIMITED.perKey, { schema, by: 'chaos' });
    for (let from = 0; from < options.jobs; from += 1000) {
      const size = Math.min(1000, options.jobs - from);
      await direct.db.transaction(async (tx) => {
        const ns = Array.from({ length: size }, (_, i) => from + i);
        const flow = await enqueuer.enqueueFlow(
          tx,
          Object.fromEntries(
            ns.map((n) => {
              const parents = parentsOf(n, from);
              return [
                `j${n}`,
                request(n, {
                  queue: queueOf(n),
                  orderingKey: keyOf(n),
                  concurrencyKey: tenantOf(n),
                  ...(parents
                    ? { after: parents.map((p) => `j${p}`), onParentFailure: runAnyway(n) ? 'run' : 'cancel' }
                    : {}),
                }),
              ];
            }),
          ),
        );
        const idOf = (n: number) => (flow[`j${n}`] as { id: string }).id;
        await tx.execute(
          sql`insert into ${sql.identifier(schema)}.chaos_enqueued (job_id, queue, ordering_key, concurrency_key, parents, run_anyway,
              stepped, signal_key, signal_early)
            select e.job_id, e.queue, e.ordering_key, e.concurrency_key,
              (select array_agg(p::bigint) from jsonb_array_elements_text(e.parents) p), e.run_anyway,
              e.stepped, e.signal_key, e.signal_early
            from jsonb_to_recordset(${JSON.stringify(
              ns.map((n) => ({
                job_id: idOf(n),
                queue: queueOf(n),
                ordering_key: keyOf(n) ?? null,
                concurrency_key: tenantOf(n) ?? null,
                parents: parentsOf(n, from)?.map(idOf) ?? null,
                run_anyway: parentsOf(n, from) ? runAnyway(n) : null,
                stepped: planOf(n).stepped,
                signal_key: planOf(n).signal ? signalKey(n) : null,
                signal_early: planOf(n).signal ? planOf(n).early : null,
              })),
            )}::jsonb) as e(job_id bigint, queue text, ordering_key text, concurrency_key text, parents jsonb, run_anyway boolean,
              stepped boolean, signal_key text, signal_early boolean)`,
        );
      });
    }
    say(`enqueued ${options.jobs} jobs in schema ${schema}`);

    // The driver under test reaches Postgres through a stand-in of this process that fails on purpose.
    standIn = await startStandIn(driver, database.url);
    standIn.faults.setRandom(
      chaosFaults(driver, options.faultChancePerTick, options.halfOpenShare, options.statementFaultScale),
    );
    const connection = standIn.connection;
    // The signals go through it too, like the workers' statements; the early half now, before any
    // worker runs (each job will find its signal at its wait), the late half once each job is seen
    // waiting.
    const signals = signalSender({ connection, admin, schema, enqueuer });
    closers.push(signals.close);
    await signals.sendEarly();
    // While the faults are on, more jobs come in through it by every enqueue path, and dead jobs are
    // replayed through it.
    const live = liveEnqueuer({
      connection,
      admin,
      schema,
      enqueuer,
      total: Math.round(options.jobs * (options.liveShare ?? 0.1)),
    });
    closers.push(live.close);
    const replayer = liveReplayer({ connection, admin, schema, max: options.replays ?? 20 });
    closers.push(replayer.close);
    // Events published through it, each fanned out to its subscribers (checkEvents).
    const publisher = eventPublisher({ connection, admin, schema, enqueuer, total: Math.round(options.jobs * 0.02) });
    closers.push(publisher.close);
    // Run-time schedules, applied through it and ticked by every worker (chaos/runtime-schedules.ts).
    const runtime = runtimeScheduleChaos({ connection, admin, direct, schema, count: 20 });
    await runtime.setup();

    const bundle = join(bundleDir, 'chaos-worker.mjs');
    await build({
      entryPoints: [fileURLToPath(new URL('./worker-process.ts', import.meta.url))],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outfile: bundle,
      external: ['pg-native'],
      banner: { js: "import { createRequire } from 'module'; const require = createRequire(import.meta.url);" },
      logLevel: 'silent',
    });
    const workerConfig = JSON.stringify({
      connection,
      transactionalSteps: transactional,
      directUrl: database.url,
      schema,
      invocationMs: options.invocationMs,
      concurrency: options.concurrency,
      duplicateTickShare: options.duplicateTickShare,
      killOnClaim: options.killOnClaim,
      killOnSettle: options.killOnSettle,
      completedJobs: options.completedJobs ?? 'keep',
      maxInvocations: options.maxInvocations ?? 0,
      startDropShare: options.startDropShare ?? 0.2,
      startDuplicateShare: options.startDuplicateShare ?? 0.2,
    });

    let kills = 0;
    // Worker processes that exited on their own (not SIGKILLed, not stopped): an uncaught error.
    let crashes = 0;
    let stopping = false;
    const startWorker = () => {
      const child = spawn(process.execPath, [bundle], {
        env: { ...process.env, CHAOS_WORKER_CONFIG: workerConfig },
        // An IPC channel carries the nudges; CHAOS_WORKER_STDERR=1 shows the workers' stderr (crashes).
        stdio: ['ignore', 'ignore', process.env.CHAOS_WORKER_STDERR === '1' ? 'inherit' : 'ignore', 'ipc'],
      });
      child.on('error', () => {}); // a nudge sent to a process that just died
      children.add(child);
      child.on('exit', (_code, signal) => {
        children.delete(child);
        if (signal === 'SIGKILL') kills++;
        else if (!stopping) crashes++;
        if (!stopping) startWorker();
      });
    };
    for (let i = 0; i < options.processes; i++) startWorker();

    // The run-time schedules' jobs keep coming while they run: counted only once they are stopped.
    let runtimeStopped = false;
    const remaining = async () =>
      Number(
        (
          await admin.query(
            `select count(*) as n from "${schema}".jobs where state in ('queued', 'running') and kind <> '${SCHEDULED_KIND}'${runtimeStopped ? '' : ` and kind <> '${RUNTIME_KIND}'`}`,
          )
        ).rows[0].n,
      );
    // Pause and resume the paused queue while the run goes on (~300 ms each way). A pause counts
    // from when it is known committed (a statement after it returned reads the clock) until its
    // resume is sent: every claim that began in between must have seen it.
    let pausedSince: number | undefined;
    let pauseId: string | undefined;
    let nextToggle = Date.now() + 300;
    let pauses = 0;
    const pauseNow = async () => {
      await pause(direct, { queue: PAUSED_QUEUE }, { schema, by: 'chaos' });
      const { rows } = await admin.query(
        `insert into "${schema}".chaos_pauses (confirmed_at) values (clock_timestamp()) returning id`,
      );
      pauseId = String(rows[0].id);
      pausedSince = Date.now();
      pauses++;
    };
    const resumeNow = async () => {
      if (pauseId === undefined) return;
      await admin.query(`update "${schema}".chaos_pauses set resume_sent_at = clock_timestamp() where id = $1`, [
        pauseId,
      ]);
      await resume(direct, { queue: PAUSED_QUEUE }, { schema });
      pauseId = undefined;
      pausedSince = undefined;
    };
    let left = options.jobs;
    let nextKill = Date.now() + options.killIntervalMs;
    let lastReport = 0;
    const faultPhaseEnds = started + options.faultPhaseLimitMs;
    // The late signals, beside the loop: those of the jobs seen waiting; once the fault phase is over,
    // any not sent yet.
    signalling = true;
    const lateSignals = (async () => {
      while (signalling) {
        await signals.sendLate(Date.now() >= faultPhaseEnds);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
    lateSignals.catch(() => {}); // awaited after the loop
    let liveDone = false;
    const liveLoop = (async () => {
      while (signalling && (await live.next())) await new Promise((resolve) => setTimeout(resolve, 20));
      liveDone = true;
    })();
    liveLoop.catch((err) => say(`live enqueues stopped: ${(err as Error).message}`));
    let eventsDone = false;
    const publishLoop = (async () => {
      while (signalling && (await publisher.next())) await new Promise((resolve) => setTimeout(resolve, 20));
      eventsDone = true;
    })();
    publishLoop.catch((err) => say(`publishes stopped: ${(err as Error).message}`));
    const replayLoop = (async () => {
      while (signalling) {
        await replayer.next();
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    })();
    replayLoop.catch((err) => say(`replays stopped: ${(err as Error).message}`));
    // neon-http: now and then the compute sleeps and refuses every request for a few seconds.
    let nextSleep = Date.now() + 5_000;
    while (true) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const now = Date.now();
      const faulting = now < faultPhaseEnds;
      if (!faulting) standIn.faults.setEnabled(false);
      if (faulting && driver === 'neon-http' && now >= nextSleep) {
        standIn.sleep(1_000 + Math.random() * 2_000);
        nextSleep = now + 10_000 + Math.random() * 10_000;
      }
      if ((options.maxInvocations ?? 0) > 0 && left > 0) {
        // Nudges, as enqueues would send them: to a random worker process, now and then twice.
        const live = [...children];
        const target = live[Math.floor(Math.random() * live.length)];
        if (target?.connected) target.send('nudge');
        if (target?.connected && Math.random() < 0.2) target.send('nudge');
      }
      if (now >= nextToggle) {
        if (pausedSince === undefined && faulting && left > 0) await pauseNow();
        else await resumeNow();
        nextToggle = Date.now() + 200 + Math.random() * 200;
      }
      if (faulting && kills < options.targetKills && now >= nextKill && left > 0) {
        const live = [...children];
        const victim = live[Math.floor(Math.random() * live.length)];
        victim?.kill('SIGKILL');
        nextKill = now + options.killIntervalMs * (0.5 + Math.random());
      }
      if (now - lastReport >= 1000) {
        lastReport = now;
        left = await remaining();
        say(
          `  t=${((now - started) / 1000).toFixed(0)}s left=${left} kills=${kills} faults=${faultTotal(standIn)} live=${live.counts().jobs} workers=${children.size}`,
        );
        // At least 3 replays (when there is a dead job to replay: a short run may have fewer).
        const replaysDone = replayer.counts().replayed >= Math.min(3, options.replays ?? 20) || replayer.idle;
        if (left === 0 && liveDone && eventsDone && replaysDone) break;
        if (now > faultPhaseEnds + 120_000) break; // the checker will report what is left as lost
      }
    }

    // Stop the workers; then drain whatever their deaths left behind, with no faults (and no pause),
    // every signal sent.
    say('stopping the workers');
    signalling = false;
    await lateSignals;
    await liveLoop;
    await publishLoop.catch(() => {});
    await replayLoop;
    await resumeNow();
    stopping = true;
    standIn.faults.setEnabled(false);
    await Promise.all(
      [...children].map(
        (child) =>
          new Promise<void>((resolve) => {
            const force = setTimeout(() => child.kill('SIGKILL'), 5_000);
            child.once('exit', () => {
              clearTimeout(force);
              resolve();
            });
            child.kill('SIGTERM');
          }),
      ),
    );
    await signals.sendLate(true);
    await runtime.stop();
    runtimeStopped = true;
    say('draining');
    const drainer = createWorker({
      db: direct,
      schema,
      jobs: [
        chaosJob({
          record: async (jobId, leaseToken, attempt) => {
            await admin.query(
              `insert into "${schema}".chaos_executions (job_id, lease_token, attempt, pid) values ($1, $2, $3, $4)`,
              [jobId, leaseToken, attempt, process.pid],
            );
          },
          die: () => {},
          dieSoon: () => {},
        }),
        stepped,
        batched,
        ...chaosSubscribers,
        runtime.job,
      ],
      concurrency: 20,
      completedJobs: options.completedJobs ?? 'keep',
      leaseGraceMs: 300,
      safetyMarginMs: 300,
      logger: silentLogger,
    });
    // Until nothing is left, or nothing moved for 60 s (what is left then is lost). Not a fixed time:
    // a queue limited to a few running jobs drains at its own pace (the full run's limited quarter,
    // 12,500 jobs 6 at a time, can outlast any fixed budget on a slow machine).
    let waiting = await remaining();
    let movedAt = Date.now();
    while (waiting > 0 && Date.now() - movedAt < 60_000) {
      await signals.sendLate(true); // those whose jobs first wait now (see sendLate)
      const summary = await drainer.runInvocation({ remainingMs: 5_000 });
      if (summary.claimed === 0) await new Promise((resolve) => setTimeout(resolve, 100)); // leases still running out
      const still = await remaining();
      if (still < waiting) movedAt = Date.now();
      waiting = still;
    }

    say('checking');
    const result = await checkRun(admin, schema);
    const events = await checkEvents(admin, schema);
    const batches = await checkBatches(admin, schema);
    const runtimeSchedules = await runtime.check();
    const faultCounts = standIn.counts();
    const connFaults = faultCounts.connectionResets + faultCounts.connectionFreezes;
    const durationMs = Date.now() - started;
    const answersLost = faultCounts['lose-answer'];
    const refused = faultCounts.refuse + faultCounts.drop + faultCounts.asleep;
    const line = `chaos: driver=${driver} jobs=${result.enqueued} processes=${options.processes} kills=${kills} conn_faults=${connFaults} answers_lost=${answersLost} refused=${refused} lost=${result.lost} unexpected=${result.unexpected} stale_writes=${result.staleWrites} dead=${result.dead} max_executions=${result.maxExecutions} order_violations=${result.orderViolations} limit_violations=${result.limitViolations} pause_violations=${result.pauseViolations} schedule_duplicates=${result.scheduleDuplicates} dependency_violations=${result.dependencyViolations} step_reruns=${result.stepReruns} signals_lost=${result.signalsLost} enqueue_duplicates=${result.enqueueDuplicates} replay_duplicates=${result.replayDuplicates} runtime_occurrences=${runtimeSchedules.occurrences} runtime_duplicates=${runtimeSchedules.duplicated} runtime_missing=${runtimeSchedules.missing}`;
    // On a line of its own: the summary line above keeps its shape.
    const eventsSummary = `chaos-${eventsLine(events)} publish_retries=${publisher.counts().retries} publish_answers_lost=${publisher.counts().duplicatesAnswered}`;
    const detail = `chaos-detail: completed=${result.completed} cancelled=${result.cancelled} pauses=${pauses} re_executed=${result.reExecuted} unexplained_executions=${result.unexplainedExecutions} duplicate_token_executions=${result.duplicateTokenExecutions} attempt_accounting_errors=${result.attemptAccountingErrors} scheduled=${result.scheduled} resets=${faultCounts.connectionResets} freezes=${faultCounts.connectionFreezes} stmt_refused=${faultCounts.refuse} stmt_dropped=${faultCounts.drop} asleep=${faultCounts.asleep} slow=${faultCounts.slow} stmt_half_open=${faultCounts['half-open']} live_enqueued=${result.liveEnqueued} live_calls=${live.counts().calls} live_retries=${live.counts().retries} live_answers_lost=${live.counts().answersLost} replayed=${result.replayed} replay_sends=${replayer.counts().sends} replay_answers_lost=${replayer.counts().answersLost} stepped=${result.stepped} stepped_completed=${result.steppedCompleted} stepped_dead=${result.steppedDead} slept=${result.slept} step_runs=${result.stepRuns} step_runs_repeated=${result.stepRunsRepeated} step_effect_errors=${result.stepEffectErrors} signals_early=${result.signalsEarly} signals_late=${result.signalsLate} waited=${result.waited} signal_retries=${signals.counts().retries} signal_blind_retries=${signals.counts().blindRetries} signal_answers_lost=${signals.counts().answersLost} runtime_schedules=${runtimeSchedules.schedules} runtime_apply_retries=${runtimeSchedules.applyRetries}${runtimeSchedules.missingSample ? ` runtime_missing_sample=[${runtimeSchedules.missingSample}]` : ''} worker_crashes=${crashes} duration_s=${(durationMs / 1000).toFixed(1)}`;
    return {
      driver,
      schema,
      line,
      detail: `${detail}\n${eventsSummary}`,
      result,
      events,
      batches,
      batchLine: batchLine(batches),
      runtimeSchedules,
      kills,
      connFaults,
      durationMs,
      failed:
        runFailed(result) ||
        batchFailed(batches) ||
        runtimeSchedules.duplicated > 0 ||
        runtimeSchedules.missing > 0 ||
        events.missing > 0 ||
        events.duplicated > 0 ||
        events.events !== events.published,
    };
  } finally {
    signalling = false;
    for (const child of children) child.kill('SIGKILL');
    for (const close of closers) await close().catch(() => {});
    await standIn?.close();
    if (!options.keepSchema) await admin.query(`drop schema if exists "${schema}" cascade`).catch(() => {});
    await direct.close();
    await admin.end();
    await database.stop();
    rmSync(bundleDir, { recursive: true, force: true });
  }
}

/** Every fault the stand-in inflicted so far (progress lines). */
function faultTotal(standIn: StandIn): number {
  return Object.values(standIn.counts()).reduce((a, b) => a + b, 0);
}
