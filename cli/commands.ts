// The commands that work on a database, each through the same core functions as the API.

import { ConfigError } from '../base/errors.js';
import type { JobRecord, JobState, JobStep } from '../base/rows.js';
import { activity, cancel, getJob, listJobs, moveToDlq, retryNow, stats } from '../core/admin.js';
import { breakers } from '../core/breakers.js';
import { pauses } from '../core/controls.js';
import { createEnqueuer } from '../core/enqueue.js';
import type { EnqueueOptions } from '../core/enqueue-options.js';
import { unsubscribedEvents } from '../core/events.js';
import { explain } from '../core/explain.js';
import type { JobRegistry } from '../core/jobs.js';
import { maskPayload } from '../core/masking.js';
import { rateLimits } from '../core/rate-limits.js';
import { replay } from '../core/replay.js';
import { migrate } from '../db/migrate.js';
import { checkSchema, hasDrift } from '../db/schema-drift.js';
import { type CommandContext, str } from './command-context.js';
import { breakersTable, pausesTable } from './control-commands.js';
import { age, table } from './format.js';
import { EXIT, UsageError } from './io.js';
import { describeDrift, describeMigrateResult, describeMigrationEvent } from './migrate-output.js';
import { rateUseTable } from './rate-commands.js';

function num(o: Record<string, unknown>, name: string): number | undefined {
  const v = str(o[name]);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new UsageError(`--${name} must be a number`);
  return n;
}
function date(o: Record<string, unknown>, name: string): Date | undefined {
  const v = str(o[name]);
  if (v === undefined) return undefined;
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) throw new UsageError(`--${name} must be a date (ISO 8601)`);
  return d;
}
function ids(rest: readonly string[], what: string): string[] {
  if (rest.length === 0) throw new UsageError(`${what} needs at least one job id`);
  for (const id of rest) if (!/^[1-9][0-9]{0,18}$/.test(id)) throw new UsageError(`"${id}" is not a job id`);
  return [...rest];
}
const masked = (registry: JobRegistry | undefined, job: JobRecord) => {
  const kinds = registry?.kinds() ?? [];
  return kinds.includes(job.kind) ? maskPayload(job.payload, registry?.get(job.kind).sensitive ?? []) : job.payload;
};
const summaryRow = (job: JobRecord) => ({
  id: job.id,
  kind: job.kind,
  queue: job.queue,
  state: job.state,
  attempt: `${job.attempt}/${job.maxAttempts}`,
  run_at: job.runAt,
  finished_at: job.finishedAt,
  reason: job.deadReason,
});

export const COMMANDS: Record<string, (ctx: CommandContext) => Promise<number>> = {
  async migrate({ conn, schema, emit, o, io }) {
    if (o.check) {
      const drift = await checkSchema(conn.executor, schema);
      emit(describeDrift(schema, drift), { schema, drift, ok: !hasDrift(drift) });
      return hasDrift(drift) ? EXIT.refused : EXIT.ok;
    }
    const result = await migrate(conn, {
      schema,
      lockTimeoutMs: num(o, 'lock-timeout'),
      statementTimeoutMs: num(o, 'statement-timeout'),
      onProgress: (event) => io.err(describeMigrationEvent(event)),
    });
    emit(describeMigrateResult(result), result);
    return EXIT.ok;
  },

  async enqueue({ conn, schema, registry, o, rest, emit }) {
    const [kind] = rest;
    if (!kind) throw new UsageError('enqueue needs a job kind');
    if (!registry)
      throw new ConfigError('enqueue needs your job kinds: pass --jobs <module> (or set SKIPLOCK_JOBS_MODULE)');
    const payloadText = str(o.payload);
    if (payloadText === undefined) throw new UsageError('enqueue needs --payload <json>');
    let payload: unknown;
    try {
      payload = JSON.parse(payloadText);
    } catch {
      throw new UsageError('--payload is not valid JSON');
    }
    const key = str(o['dedupe-key']);
    const mode = str(o['dedupe-mode']) ?? 'skip';
    const options: EnqueueOptions = {
      queue: str(o.queue),
      priority: num(o, 'priority'),
      delayMs: num(o, 'delay'),
      runAt: date(o, 'run-at'),
      deadline: date(o, 'deadline'),
      maxAttempts: num(o, 'max-attempts'),
      correlationId: str(o['correlation-id']),
      after: str(o.after)
        ?.split(',')
        .map((id) => id.trim()),
      onParentFailure: str(o['on-parent-failure']) as EnqueueOptions['onParentFailure'],
      dedupe: key
        ? mode === 'window'
          ? { key, mode: 'window', windowMs: num(o, 'window-ms') ?? 0 }
          : { key, mode: mode as 'skip' | 'replace' }
        : undefined,
    };
    for (const k of Object.keys(options) as (keyof EnqueueOptions)[]) if (options[k] === undefined) delete options[k];
    const result = await createEnqueuer({ schema }).enqueueByKind(conn, registry, kind, payload, options);
    emit(`${result.outcome} job ${result.id}`, result);
    return EXIT.ok;
  },

  async stats({ conn, schema, o, emit, io, json }) {
    const iterations = o.watch ? (num(o, 'iterations') ?? Number.POSITIVE_INFINITY) : 1;
    const interval = num(o, 'interval') ?? 2_000;
    for (let i = 0; i < iterations; i++) {
      const rows = await stats(conn, { schema });
      const human = table(
        rows.map((r) => ({
          queue: r.queue,
          kind: r.kind,
          ready: r.ready,
          scheduled: r.scheduled,
          retrying: r.retryWaiting,
          waiting: r.waiting,
          sleeping: r.sleeping,
          'for signal': r.waitingForSignal,
          running: r.running,
          expired: r.leaseExpired,
          dead: r.dead,
          'done 1h': r.completedLastHour,
          'died 1h': r.deadLastHour,
          oldest: age(r.oldestReadyAgeSeconds),
          paused: r.paused ? `${r.paused.scope} ${age((Date.now() - r.paused.since.getTime()) / 1000)}` : '',
        })),
        [
          'queue',
          'kind',
          'ready',
          'scheduled',
          'retrying',
          'waiting',
          'sleeping',
          'for signal',
          'running',
          'expired',
          'dead',
          'done 1h',
          'died 1h',
          'oldest',
          'paused',
        ],
      );
      const window = num(o, 'window') ?? 300;
      const recent = await activity(conn, { schema, windowSeconds: window });
      const activityTable = table(
        recent.map((r) => ({
          queue: r.queue,
          kind: r.kind,
          completed: r.completed,
          dead: r.dead,
          'jobs/s': r.throughputPerSecond.toFixed(2),
          'error rate': r.errorRate === null ? '' : `${(r.errorRate * 100).toFixed(1)}%`,
        })),
        ['queue', 'kind', 'completed', 'dead', 'jobs/s', 'error rate'],
      );
      if (o.watch && !json && io.tty) io.out('\u001b[2J\u001b[H');
      const paused = await pauses(conn, { schema });
      // Destinations held back: a breaker not closed, or a Retry-After deferral.
      const held = (await breakers(conn, { schema })).filter((d) => d.state !== 'closed' || d.deferredUntil);
      // Rate-limited scopes that started jobs within their period (busiest first).
      const rated = (await rateLimits(conn, { schema })).use.slice(0, 10);
      // Events published in the last hour that no subscriber was registered for (docs/events.md).
      const lonely = await unsubscribedEvents(conn, { schema });
      const warnings = [
        ...lonely.map(
          (e) =>
            `event ${e.name}: ${e.count} published in the last hour with no subscriber; deploy its subscribers (skiplock sync), then skiplock events replay <kind> --from …`,
        ),
      ].concat(
        rows.flatMap((r) => [
          ...(r.unserved
            ? [
                `no worker served queue ${r.queue} (kind ${r.kind}) in the last 10 min: ${r.ready} ready; does a deployed worker list this queue (SKIPLOCK_QUEUES) and kind?`,
              ]
            : []),
          ...(r.unfit
            ? [
                `no worker that serves queue ${r.queue} fits kind ${r.kind}'s timeoutMs: ${r.ready} ready; the longest invocation has ${r.unfit.budgetMs} ms for attempts; raise the function's timeout or lower the kind's timeoutMs`,
              ]
            : []),
        ]),
      );
      const warning = warnings.length === 0 ? '' : `\n\n${warnings.join('\n')}`;
      const text = `${human}${warning}\n\nlast ${window} s:\n${activityTable}${paused.length > 0 ? `\n\n${pausesTable(paused)}` : ''}${held.length > 0 ? `\n\n${breakersTable(held)}` : ''}${rated.length > 0 ? `\n\n${rateUseTable(rated)}` : ''}`;
      emit(o.watch ? `${new Date().toISOString()}\n${text}` : text, {
        depth: rows,
        activity: { windowSeconds: window, rows: recent },
        paused,
        breakers: held,
        rateLimited: rated,
        unsubscribedEvents: lonely,
      });
      if (i + 1 < iterations) await new Promise((r) => setTimeout(r, interval));
    }
    return EXIT.ok;
  },

  async 'jobs list'({ conn, schema, o, emit }) {
    const state = str(o.state) as JobState | undefined;
    if (state && !['queued', 'running', 'completed', 'dead', 'cancelled'].includes(state)) {
      throw new UsageError('--state must be queued, running, completed, dead or cancelled');
    }
    const jobs = await listJobs(conn, {
      schema,
      state,
      queue: str(o.queue),
      kind: str(o.kind),
      since: date(o, 'since'),
      limit: num(o, 'limit'),
    });
    emit(
      table(jobs.map(summaryRow), ['id', 'kind', 'queue', 'state', 'attempt', 'run_at', 'finished_at', 'reason']),
      jobs.map(summaryRow),
    );
    return EXIT.ok;
  },

  async 'jobs show'({ conn, schema, registry, rest, emit }) {
    const [id] = ids(rest, 'jobs show');
    const job = await getJob(conn, id as string, { schema });
    if (!job) {
      emit(`job ${id} does not exist`, { error: 'not_found', id });
      return EXIT.refused;
    }
    const shown = { ...job, payload: masked(registry, job), leaseToken: job.leaseToken };
    const lines = [
      `job ${job.id}  ${job.kind} on ${job.queue}  ${job.state}${job.deadReason ? ` (${job.deadReason})` : ''}${suspendedIn(job)}`,
      `attempt ${job.attempt} of ${job.maxAttempts}; ${Number.isNaN(job.runAt.getTime()) ? 'waiting for the jobs before it to end' : `run at ${job.runAt.toISOString()}`}; created ${job.createdAt.toISOString()}`,
      `payload: ${JSON.stringify(shown.payload)}`,
      leaseLine(job),
      `correlation id: ${job.correlationId ?? '—'}; dedupe: ${job.dedupeKey ? `${job.dedupeMode} ${job.dedupeKey}` : '—'}`,
      `replays: ${job.replayCount}${job.replayedAt ? ` (last ${job.replayedAt.toISOString()} by ${job.replayedBy})` : ''}`,
      ...(job.progress === null ? [] : [`progress: ${JSON.stringify(job.progress)}`]),
      ...(job.result === null ? [] : [`result: ${JSON.stringify(job.result)}`]),
      ...(job.after.length === 0
        ? []
        : [`waits for: ${job.after.join(', ')} (if one dies or is cancelled: ${job.onParentFailure})`]),
      ...(job.dependents.length === 0 ? [] : [`waited for by: ${job.dependents.join(', ')}`]),
      ...(job.steps && job.steps.length > 0
        ? [`steps (${job.steps.length}):`, ...job.steps.map((step) => `  ${stepLine(step)}`)]
        : []),
      `errors (${job.errors.length}):`,
      ...job.errors.map(
        (e) => `  attempt ${e.attempt ?? '?'}${e.step ? ` (step ${e.step})` : ''}: ${e.class}: ${e.message}`,
      ),
    ];
    emit(lines.join('\n'), shown);
    return EXIT.ok;
  },

  async 'jobs why'({ conn, schema, registry, rest, emit }) {
    const [id] = ids(rest, 'jobs why');
    const e = await explain(conn, id as string, { schema, jobs: registry?.all() ?? [] });
    if (!e) {
      emit(`job ${id} does not exist`, { error: 'not_found', id });
      return EXIT.refused;
    }
    const lines = [
      `job ${e.id}  ${e.kind} on ${e.queue}  ${e.state}`,
      ...(e.ready
        ? [`ready: ${e.readyAhead ?? 0} ready job(s) of queue ${e.queue} are ahead of it`]
        : e.holds.map((h) => `- ${h.reason}: ${h.message}`)),
      ...(e.origin
        ? [
            `from event ${e.origin.eventId} (${e.origin.name}, published ${e.origin.publishedAt.toISOString()}) through subscription ${e.origin.subscription}`,
          ]
        : []),
      ...(registry ? [] : ['(limits, rates and run windows declared in code are checked with --jobs <module>)']),
    ];
    emit(lines.join('\n'), e);
    return EXIT.ok;
  },

  async 'dlq list'({ conn, schema, o, emit }) {
    const jobs = await listJobs(conn, {
      schema,
      state: 'dead',
      reason: str(o.reason),
      kind: str(o.kind),
      queue: str(o.queue),
      since: date(o, 'since'),
      limit: num(o, 'limit'),
    });
    const rows = jobs.map((j) => ({
      ...summaryRow(j),
      error: j.lastError ? `${j.lastError.class}: ${j.lastError.message}` : '',
    }));
    emit(table(rows, ['id', 'kind', 'queue', 'reason', 'attempt', 'finished_at', 'error']), rows);
    return EXIT.ok;
  },

  async 'dlq replay'({ conn, schema, registry, o, rest, emit, io }) {
    const limit = num(o, 'limit') ?? (rest.length > 0 ? rest.length : 1_000);
    const base = {
      kind: str(o.kind),
      queue: str(o.queue),
      reason: str(o.reason),
      since: date(o, 'since'),
      until: date(o, 'until'),
      all: o.all === true,
      dryRun: o['dry-run'] === true,
      resetAttempts: o['keep-attempts'] !== true,
      fromStep: str(o['from-step']),
      restart: o.restart === true,
      by: str(o.by) ?? `cli:${io.env.USER ?? 'unknown'}`,
      schema,
      registry,
    };
    const given = rest.length > 0 ? ids(rest, 'dlq replay') : undefined;
    const replayed: { id: string }[] = [];
    const refused: { id: string; message: string }[] = [];
    // In chunks, with progress on stderr: replaying thousands is one short statement per chunk.
    const chunk = 500;
    const progress = (done: number) => {
      if (io.tty) io.err(`\rreplayed ${done}/${given?.length ?? limit}`);
    };
    if (given) {
      for (let i = 0; i < given.length; i += chunk) {
        const part = await replay(conn, { ...base, ids: given.slice(i, i + chunk), limit: chunk });
        replayed.push(...part.replayed);
        refused.push(...part.refused);
        progress(replayed.length);
      }
    } else {
      while (replayed.length < limit) {
        const part = await replay(conn, { ...base, limit: Math.min(chunk, limit - replayed.length) });
        replayed.push(...part.replayed);
        progress(replayed.length);
        if (part.replayed.length === 0 || base.dryRun) break;
      }
    }
    if (io.tty) io.err('\n');
    const verb = base.dryRun ? 'would replay' : 'replayed';
    emit(
      [
        `${verb} ${replayed.length} job(s)${replayed.length ? `: ${replayed.map((r) => r.id).join(', ')}` : ''}`,
        ...refused.map((r) => `refused: ${r.message}`),
      ].join('\n'),
      { replayed, refused, dryRun: base.dryRun },
    );
    return refused.length > 0 ? EXIT.refused : EXIT.ok;
  },

  async 'dlq move'({ conn, schema, rest, o, emit, io }) {
    const by = str(o.by) ?? `cli:${io.env.USER ?? 'unknown'}`;
    const outcomes = await moveToDlq(conn, ids(rest, 'dlq move'), { schema, by, reason: str(o.reason) });
    emit(
      outcomes
        .map((m) =>
          m.moved
            ? `moved job ${m.id} to the DLQ`
            : m.previousState
              ? `job ${m.id} is ${m.previousState}: only queued or running jobs can be moved`
              : `job ${m.id} does not exist`,
        )
        .join('\n'),
      outcomes,
    );
    return outcomes.every((m) => m.moved) ? EXIT.ok : EXIT.refused;
  },

  async cancel({ conn, schema, rest, emit }) {
    const outcomes = await cancel(conn, ids(rest, 'cancel'), { schema });
    emit(
      outcomes
        .map((c) =>
          c.cancelled
            ? `cancelled job ${c.id}`
            : c.previousState
              ? `job ${c.id} is ${c.previousState}: not cancelled`
              : `job ${c.id} does not exist`,
        )
        .join('\n'),
      outcomes,
    );
    return outcomes.every((c) => c.cancelled) ? EXIT.ok : EXIT.refused;
  },

  async retry({ conn, schema, rest, emit }) {
    const outcomes = await retryNow(conn, ids(rest, 'retry'), { schema });
    emit(
      outcomes
        .map((r) =>
          r.retried
            ? `job ${r.id} will run now`
            : r.previousState === 'dead'
              ? `job ${r.id} is dead: use \`skiplock dlq replay ${r.id}\``
              : r.previousState
                ? `job ${r.id} is ${r.previousState}: only waiting jobs can be retried now`
                : `job ${r.id} does not exist`,
        )
        .join('\n'),
      outcomes,
    );
    return outcomes.every((r) => r.retried) ? EXIT.ok : EXIT.refused;
  },
};

/**
 * What a queued job's last step keeps it for, after its state in `jobs show`'s first line: a sleep
 * until its wake-up, a wait for a signal until its timeout (else nothing).
 */
function suspendedIn(job: JobRecord): string {
  const last = job.steps?.at(-1);
  if (job.state !== 'queued' || !last || (last.state !== 'sleeping' && last.state !== 'waiting')) return '';
  return `: ${stepState(last)} (step ${last.name})`;
}

/** `sleeping until T`, `waiting for signal "K" until T`, or the step's state. */
function stepState(step: JobStep): string {
  if (step.state === 'sleeping') return `sleeping until ${step.wakeAt?.toISOString() ?? '?'}`;
  if (step.state === 'waiting')
    return `waiting for signal "${step.signalKey}" until ${step.timeoutAt?.toISOString() ?? '?'}`;
  return step.state;
}

/**
 * Who holds the job: only a running job has a holder and a lease end. A queued job (asleep, waiting,
 * retrying) or a finished one keeps the token and holder of its last claim: history, not a lease.
 */
function leaseLine(job: JobRecord): string {
  if (job.state === 'running' && job.leaseToken) {
    return `lease: ${job.leaseToken} held by ${job.lockedBy ?? '?'} until ${job.leaseExpiresAt?.toISOString() ?? '?'}`;
  }
  return job.lockedBy ? `lease: none (last held by ${job.lockedBy})` : 'lease: none';
}

/** One durable step as `jobs show` prints it: name, type, state, attempts, duration, result size, last error. */
function stepLine(step: JobStep): string {
  const parts = [`${step.position + 1}. ${step.name}`, step.type === 'run' ? '' : `(${step.type})`, stepState(step)];
  parts.push(`${step.attempts} attempt${step.attempts === 1 ? '' : 's'}`);
  if (step.durationMs !== null) parts.push(`${step.durationMs} ms`);
  if (step.resultBytes !== null) parts.push(`result ${step.resultBytes} B`);
  if (step.lastError) parts.push(`last error: ${String(step.lastError.message ?? step.lastError.class ?? '?')}`);
  return parts.filter((p) => p !== '').join('  ');
}
