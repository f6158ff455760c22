import { InvalidOptionsError } from '../../base/errors.js';
import { cancel, moveToDlq, retryNow } from '../../core/admin.js';
import { resetBreaker } from '../../core/breakers.js';
import { pause, resume } from '../../core/controls.js';
import { replay } from '../../core/replay.js';
import { createScheduler, type RuntimeScheduleSpec } from '../../core/runtime-schedules.js';
import type { SkiplockConnection } from '../../db/connect.js';
import { type ConsoleContext, csrfField, withDb } from './context.js';
import { type Html, html, type Page } from './html.js';
import { filtersOf, readJobs } from './job-pages.js';

/**
 * POST /actions: every change the console makes, through the same core functions as the CLI. A
 * form without `confirmed=1` gets a confirmation page (a bulk replay's shows its dry run: the ids
 * that would be replayed, which are then exactly the ones replayed); with it, the change is made,
 * logged with who made it, and reported.
 */

/** At most this many jobs per action (a bulk replay takes the first this many matches). */
export const MAX_IDS = 1000;

const ID = /^[1-9][0-9]{0,18}$/;

interface Outcome {
  ok: boolean;
  title: string;
  lines: Html[];
  /** Logged with the action. */
  log: Record<string, unknown>;
}

function idsOf(form: URLSearchParams): string[] {
  const ids = [...form.getAll('id'), ...(form.get('ids') ?? '').split(',')].map((s) => s.trim()).filter(Boolean);
  const unique = [...new Set(ids)];
  if (unique.length === 0) throw new InvalidOptionsError('select at least one job');
  if (unique.length > MAX_IDS) throw new InvalidOptionsError(`at most ${MAX_IDS} jobs per action`);
  const bad = unique.find((id) => !ID.test(id));
  if (bad !== undefined) throw new InvalidOptionsError(`not a job id: ${bad.slice(0, 40)}`);
  return unique;
}

const jobLinks = (ctx: ConsoleContext, ids: readonly string[]) =>
  html`${ids.slice(0, 50).map((id) => html`<a href="${ctx.base}/jobs/${id}">#${id}</a> `)}${
    ids.length > 50 ? html`<span class="muted">and ${ids.length - 50} more</span>` : ''
  }`;

function targetOf(form: URLSearchParams): { scope: 'queue' | 'kind'; name: string } {
  const scope = form.get('scope') ?? (form.has('queue') ? 'queue' : form.has('kind') ? 'kind' : '');
  const name = (form.get('name') ?? form.get(scope) ?? '').trim();
  if ((scope !== 'queue' && scope !== 'kind') || name === '') throw new InvalidOptionsError('name a queue or a kind');
  return { scope, name };
}

interface Action {
  /** What the confirmation asks, and the fields the confirmed form carries on. */
  confirm(ctx: ConsoleContext, form: URLSearchParams): Promise<{ question: Html; fields: Html; danger?: boolean }>;
  run(ctx: ConsoleContext, form: URLSearchParams): Promise<Outcome>;
}

const hidden = (name: string, value: string) => html`<input type="hidden" name="${name}" value="${value}">`;
const idFields = (ids: string[]) => hidden('ids', ids.join(','));

/** An action on selected jobs: the question, and the core call with what it reports. */
function onIds(
  verb: string,
  call: (ctx: ConsoleContext, ids: string[], form: URLSearchParams) => Promise<{ done: string[]; not: Html[] }>,
  danger = false,
): Action {
  return {
    async confirm(ctx, form) {
      const ids = idsOf(form);
      return { question: html`${verb} ${ids.length} job(s)? ${jobLinks(ctx, ids)}`, fields: idFields(ids), danger };
    },
    async run(ctx, form) {
      const ids = idsOf(form);
      const { done, not } = await call(ctx, ids, form);
      return {
        ok: done.length > 0,
        title: `${verb}: ${done.length} of ${ids.length} job(s)`,
        lines: [done.length > 0 ? html`${verb}: ${jobLinks(ctx, done)}` : html`Nothing changed.`, ...not],
        log: { ids: ids.slice(0, 100), requested: ids.length, changed: done.length },
      };
    },
  };
}

const unchanged = (ctx: ConsoleContext, id: string, state: string | null, why: string) =>
  html`<a href="${ctx.base}/jobs/${id}">#${id}</a> ${state === null ? 'does not exist' : `is ${state}: ${why}`}`;

const ACTIONS: Record<string, Action> = {
  replay: onIds('Replay', async (ctx, ids) => {
    const result = await withDb(ctx, (db) =>
      replay(db, { ids, limit: ids.length, by: ctx.by, schema: ctx.schema, registry: ctx.registry }),
    );
    return { done: result.replayed.map((r) => r.id), not: result.refused.map((r) => html`${r.message}`) };
  }),
  cancel: onIds('Cancel', async (ctx, ids) => {
    const outcomes = await withDb(ctx, (db) => cancel(db, ids, { schema: ctx.schema }));
    const not = outcomes.filter((o) => !o.cancelled);
    return {
      done: outcomes.filter((o) => o.cancelled).map((o) => o.id),
      not: not.map((o) => unchanged(ctx, o.id, o.previousState, 'only queued or running jobs can be cancelled')),
    };
  }),
  retry_now: onIds('Retry now', async (ctx, ids) => {
    const outcomes = await withDb(ctx, (db) => retryNow(db, ids, { schema: ctx.schema }));
    return {
      done: outcomes.filter((o) => o.retried).map((o) => o.id),
      not: outcomes
        .filter((o) => !o.retried)
        .map((o) => unchanged(ctx, o.id, o.previousState, 'only waiting jobs can be made due')),
    };
  }),
  move_to_dlq: onIds(
    'Move to DLQ',
    async (ctx, ids) => {
      const outcomes = await withDb(ctx, (db) => moveToDlq(db, ids, { schema: ctx.schema, by: ctx.by }));
      return {
        done: outcomes.filter((o) => o.moved).map((o) => o.id),
        not: outcomes
          .filter((o) => !o.moved)
          .map((o) => unchanged(ctx, o.id, o.previousState, 'only queued or running jobs can be moved')),
      };
    },
    true,
  ),
  replay_matching: {
    // The dry run: what the filter matches now. The confirmed form replays exactly these ids.
    async confirm(ctx, form) {
      const url = new URL('http://console/dlq');
      for (const k of ['kind', 'queue', 'reason', 'since']) {
        const v = form.get(k);
        if (v) url.searchParams.set(k, v);
      }
      const jobs = await readJobs(ctx, filtersOf(url, true), MAX_IDS);
      if (jobs.length === 0) throw new InvalidOptionsError('no dead job matches these filters now');
      const ids = jobs.map((j) => j.id);
      const kinds = [...new Set(jobs.map((j) => j.kind))];
      return {
        question: html`Dry run: ${ids.length} dead job(s)${ids.length === MAX_IDS ? ` (the first ${MAX_IDS})` : ''} match,
          of kind(s) ${kinds.join(', ')}. Replay them? ${jobLinks(ctx, ids)}`,
        fields: html`${hidden('action', 'replay')}${idFields(ids)}`,
      };
    },
    async run() {
      throw new InvalidOptionsError('confirm the dry run first');
    },
  },
  pause: {
    async confirm(_ctx, form) {
      const { scope, name } = targetOf(form);
      const reason = form.get('reason')?.trim() ?? '';
      return {
        question: html`Pause ${scope} <strong>${name}</strong>? No invocation claims its jobs until it is resumed.`,
        fields: html`${hidden('scope', scope)}${hidden('name', name)}${hidden('reason', reason)}`,
        danger: true,
      };
    },
    async run(ctx, form) {
      const { scope, name } = targetOf(form);
      const reason = form.get('reason')?.trim() || undefined;
      const to = scope === 'queue' ? { queue: name } : { kind: name };
      const result = await withDb(ctx, (db) => pause(db, to, { schema: ctx.schema, by: ctx.by, reason }));
      return {
        ok: true,
        title: result.changed ? `Paused ${scope} ${name}` : `${scope} ${name} was already paused`,
        lines: [html`Paused since ${result.pause.pausedAt.toISOString()} by ${result.pause.pausedBy}.`],
        log: { [scope]: name, reason, changed: result.changed },
      };
    },
  },
  resume: {
    async confirm(_ctx, form) {
      const { scope, name } = targetOf(form);
      return {
        question: html`Resume ${scope} <strong>${name}</strong>?`,
        fields: html`${hidden('scope', scope)}${hidden('name', name)}`,
      };
    },
    async run(ctx, form) {
      const { scope, name } = targetOf(form);
      const to = scope === 'queue' ? { queue: name } : { kind: name };
      const ended = await withDb(ctx, (db) => resume(db, to, { schema: ctx.schema }));
      return {
        ok: ended !== null,
        title: ended ? `Resumed ${scope} ${name}` : `${scope} ${name} was not paused`,
        lines: ended ? [html`It had been paused since ${ended.pausedAt.toISOString()} by ${ended.pausedBy}.`] : [],
        log: { [scope]: name, resumed: ended !== null },
      };
    },
  },
  reset_breaker: {
    async confirm(_ctx, form) {
      const destination = (form.get('destination') ?? '').trim();
      if (!destination) throw new InvalidOptionsError('name a destination');
      return {
        question: html`Reset the circuit breaker of <strong>${destination}</strong>? Its jobs are claimable at once.`,
        fields: hidden('destination', destination),
      };
    },
    async run(ctx, form) {
      const destination = (form.get('destination') ?? '').trim();
      const { previous } = await withDb(ctx, (db) => resetBreaker(db, destination, { schema: ctx.schema, by: ctx.by }));
      return {
        ok: previous !== null,
        title: previous ? `Reset the breaker of ${destination}` : `No breaker recorded for ${destination}`,
        lines: previous ? [html`It was ${previous}.`] : [],
        log: { destination, previous },
      };
    },
  },
  schedule_save: {
    async confirm(ctx, form) {
      const spec = scheduleSpecOf(ctx, form);
      const pattern = spec.cron !== undefined ? html`<code>${spec.cron}</code>` : html`every ${form.get('every')} s`;
      return {
        question: html`Save the schedule <strong>${spec.key}</strong>: ${spec.job.kind}, ${pattern}, ${
          spec.timezone ?? 'UTC'
        }? A schedule with this key is replaced; its next run is computed afresh.`,
        fields: html`${['key', 'kind', 'cron', 'every', 'timezone', 'payload'].map((name) =>
          hidden(name, form.get(name) ?? ''),
        )}`,
      };
    },
    async run(ctx, form) {
      const spec = scheduleSpecOf(ctx, form);
      const result = await withDb(ctx, (db) => createScheduler({ schema: ctx.schema }).upsertSchedule(db, spec));
      const verb = result.outcome === 'created' ? 'Created' : result.outcome === 'unchanged' ? 'Kept' : 'Updated';
      return {
        ok: true,
        title: `${verb} schedule ${spec.key}`,
        lines: result.nextRunAt ? [html`Next run: ${result.nextRunAt.toISOString()}.`] : [],
        log: { schedule: spec.key, kind: spec.job.kind, outcome: result.outcome },
      };
    },
  },
  schedule_pause: onSchedule('Pause', 'No occurrence is enqueued until it is resumed.', (s, db, key) =>
    s.pauseSchedule(db, key),
  ),
  schedule_resume: onSchedule(
    'Resume',
    'It runs again from its next occurrence; what it missed is not made up.',
    (s, db, key) => s.resumeSchedule(db, key),
  ),
  schedule_delete: onSchedule('Delete', 'The schedule is removed; jobs it already enqueued stay.', (s, db, key) =>
    s.deleteSchedule(db, key),
  ),
};

/**
 * A run-time schedule from the schedules page's form: a kind the console serves (its payload checked
 * by the kind's schema when written), a cron or an interval in seconds, a time zone, a JSON payload.
 */
function scheduleSpecOf(ctx: ConsoleContext, form: URLSearchParams): RuntimeScheduleSpec {
  const field = (name: string) => (form.get(name) ?? '').trim();
  const key = field('key');
  if (!key) throw new InvalidOptionsError('name the schedule (its key)');
  const kind = field('kind');
  if (!ctx.registry.kinds().includes(kind)) {
    throw new InvalidOptionsError(
      `unknown kind ${kind.slice(0, 64)}: the console serves ${ctx.registry.kinds().join(', ')}`,
    );
  }
  const spec: RuntimeScheduleSpec = { key, job: ctx.registry.get(kind) };
  const cron = field('cron');
  const every = field('every');
  if (cron && every) throw new InvalidOptionsError('give a cron or an interval, not both');
  if (cron) spec.cron = cron;
  else if (/^[1-9][0-9]{0,8}$/.test(every)) spec.everyMs = Number(every) * 1000;
  else throw new InvalidOptionsError('give a cron, or an interval in whole seconds');
  if (field('timezone')) spec.timezone = field('timezone');
  const payload = field('payload');
  if (payload) {
    try {
      spec.payload = JSON.parse(payload);
    } catch {
      throw new InvalidOptionsError('the payload is not JSON');
    }
  }
  return spec;
}

/** An action on one run-time schedule, by key (createScheduler: the same call as the CLI's). */
function onSchedule(
  verb: string,
  note: string,
  call: (scheduler: ReturnType<typeof createScheduler>, db: SkiplockConnection, key: string) => Promise<boolean>,
): Action {
  const keyOf = (form: URLSearchParams) => {
    const key = (form.get('key') ?? '').trim();
    if (!key) throw new InvalidOptionsError('name a schedule');
    return key;
  };
  return {
    async confirm(_ctx, form) {
      const key = keyOf(form);
      return {
        question: html`${verb} the schedule <strong>${key}</strong>? ${note}`,
        fields: hidden('key', key),
        danger: verb === 'Delete',
      };
    },
    async run(ctx, form) {
      const key = keyOf(form);
      const done = await withDb(ctx, (db) => call(createScheduler({ schema: ctx.schema }), db, key));
      return {
        ok: done,
        title: done ? `${verb}d schedule ${key}` : `Nothing changed for schedule ${key}`,
        lines: done ? [] : [html`No run-time schedule ${key} in a state to ${verb.toLowerCase()}.`],
        log: { schedule: key, changed: done },
      };
    },
  };
}

export const ACTION_NAMES = Object.keys(ACTIONS);

/** The confirmation page, or — confirmed — the change made, logged and reported. */
export async function handleAction(ctx: ConsoleContext, form: URLSearchParams): Promise<Page> {
  const name = form.get('action') ?? '';
  const action = Object.hasOwn(ACTIONS, name) ? ACTIONS[name] : undefined;
  if (!action) throw new InvalidOptionsError(`unknown action ${JSON.stringify(name.slice(0, 40))}`);
  if (form.get('confirmed') !== '1') {
    const { question, fields, danger } = await action.confirm(ctx, form);
    return {
      title: 'Confirm',
      body: html`<h1>Confirm</h1><div class="notice">${question}</div>
        <form method="post" action="${ctx.base}/actions" class="actions">${csrfField(ctx)}
        ${name === 'replay_matching' ? html`` : hidden('action', name)}${fields}${hidden('confirmed', '1')}
        <button class="${danger ? 'danger' : 'primary'}">Confirm</button> <a class="button" href="${ctx.base}/">Cancel</a></form>`,
    };
  }
  const outcome = await action.run(ctx, form);
  ctx.runtime.logger.info('console_action', { action: name, by: ctx.by, client: ctx.client, ...outcome.log });
  return {
    title: outcome.title,
    body: html`<h1>Done</h1><div class="notice ${outcome.ok ? 'ok' : 'bad'}" role="status">${outcome.title}</div>
      <ul>${outcome.lines.map((l) => html`<li>${l}</li>`)}</ul>
      <p><a href="${ctx.base}/">Overview</a> · <a href="${ctx.base}/jobs">Jobs</a> · <a href="${ctx.base}/dlq">Dead letters</a> · <a href="${ctx.base}/flow">Controls</a></p>`,
  };
}
