import { InvalidOptionsError } from '../../base/errors.js';
import { JOB_STATES, type JobState, type JobStep } from '../../base/rows.js';
import { getJob, type JobRecord, listJobs } from '../../core/admin.js';
import { explain, type JobExplanation } from '../../core/explain.js';
import { maskSecretText } from '../../core/masking.js';
import { type ConsoleContext, csrfField, query, shownValue, stateBadge, withDb } from './context.js';
import type { Page } from './html.js';
import { formatTime, type Html, html } from './html.js';

/** The job list, the DLQ and one job's page. */

const SINCE: Record<string, number> = { '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000 };

/** `1h`, `24h`, `7d`, or an ISO time → a Date; anything else is refused. */
function sinceOf(text: string | undefined, now: Date): Date | undefined {
  if (!text) return undefined;
  if (Object.hasOwn(SINCE, text)) return new Date(now.getTime() - (SINCE[text] as number));
  const at = new Date(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || !Number.isFinite(at.getTime())) {
    throw new InvalidOptionsError('since must be 1h, 24h, 7d or a date such as 2026-11-23T10:00Z');
  }
  return at;
}

const param = (url: URL, name: string) => {
  const value = url.searchParams.get(name)?.trim();
  return value ? value : undefined;
};

export interface JobFilters {
  state?: JobState;
  kind?: string;
  queue?: string;
  reason?: string;
  since?: string;
  /** The page after the one that ended with this id. */
  before?: string;
}

export function filtersOf(url: URL, dead: boolean): JobFilters {
  const state = param(url, 'state');
  if (state !== undefined && !(JOB_STATES as readonly string[]).includes(state)) {
    throw new InvalidOptionsError(`state must be one of ${JOB_STATES.join(', ')}`);
  }
  return {
    state: dead ? 'dead' : (state as JobState | undefined),
    kind: param(url, 'kind'),
    queue: param(url, 'queue'),
    reason: dead ? param(url, 'reason') : undefined,
    since: param(url, 'since'),
    before: param(url, 'before'),
  };
}

export async function readJobs(ctx: ConsoleContext, filters: JobFilters, limit: number): Promise<JobRecord[]> {
  const since = sinceOf(filters.since, ctx.now ?? new Date());
  const { state, kind, queue, reason, before: beforeId } = filters;
  return withDb(ctx, (db) => listJobs(db, { schema: ctx.schema, state, kind, queue, reason, since, beforeId, limit }));
}

const lastError = (job: JobRecord) =>
  job.lastError ? maskSecretText(`${job.lastError.class}: ${job.lastError.message}`) : '';
/** A job waiting for its turn (ordering key) or its parents has no time to run at: run_at is infinity. */
const waitingForOthers = (job: JobRecord) => job.state === 'queued' && !Number.isFinite(job.runAt.getTime());
const runAtText = (job: JobRecord) => (waitingForOthers(job) ? 'when what it waits for ends' : formatTime(job.runAt));

function filterForm(ctx: ConsoleContext, path: string, f: JobFilters, dead: boolean): Html {
  const input = (name: keyof JobFilters, label: string, placeholder = '') =>
    html`<label>${label}<input name="${name}" value="${f[name] ?? ''}" placeholder="${placeholder}"></label>`;
  const sinceOptions = ['', '1h', '24h', '7d'].map(
    (v) => html`<option value="${v}" ${f.since === v ? 'selected' : ''}>${v ? `last ${v}` : 'any time'}</option>`,
  );
  const states = ['', ...JOB_STATES].map(
    (s) => html`<option value="${s}" ${f.state === s ? 'selected' : ''}>${s || 'any'}</option>`,
  );
  return html`<form class="filters" method="get" action="${ctx.base}${path}">
    ${dead ? html`` : html`<label>State<select name="state">${states}</select></label>`}
    ${input('kind', 'Kind')}${input('queue', 'Queue')}${dead ? input('reason', 'Reason', 'max_attempts, http_4xx, …') : html``}
    <label>${dead ? 'Died' : 'Ended or created'} since<select name="since">${sinceOptions}</select></label>
    <button>Filter</button> <a class="button" href="${ctx.base}${path}">Clear</a></form>`;
}

function jobTable(ctx: ConsoleContext, jobs: JobRecord[], dead: boolean, selectable: boolean): Html {
  if (jobs.length === 0) return html`<p class="muted">No jobs match.</p>`;
  const rows = jobs.map(
    (j) => html`<tr>
      ${selectable ? html`<td><input type="checkbox" name="id" value="${j.id}" aria-label="select job ${j.id}"></td>` : html``}
      <td><a href="${ctx.base}/jobs/${j.id}">#${j.id}</a></td><td>${j.kind}</td><td>${j.queue}</td>
      <td>${dead ? html`<span class="badge dead">${j.deadReason}</span>` : stateBadge(j)}</td>
      <td class="n">${j.attempt}/${j.maxAttempts}</td>
      <td>${dead ? formatTime(j.finishedAt) : j.state === 'queued' ? runAtText(j) : formatTime(j.finishedAt ?? j.attemptedAt)}</td>
      <td class="bad">${lastError(j)}</td></tr>`,
  );
  return html`<table><thead><tr>${selectable ? html`<th></th>` : html``}<th>Job</th><th>Kind</th><th>Queue</th>
    <th>${dead ? 'Reason' : 'State'}</th><th class="n">Attempt</th><th>${dead ? 'Died' : 'Run at / ended'}</th><th>Last error</th>
    </tr></thead><tbody>${rows}</tbody></table>`;
}

const PAGE_SIZE = 100;

/** "Newest first, at most 100", with links to the newest page and to the next older one. */
function pager(ctx: ConsoleContext, path: string, f: JobFilters, jobs: JobRecord[]): Html {
  const keep = {
    state: path === '/jobs' ? f.state : undefined,
    kind: f.kind,
    queue: f.queue,
    reason: f.reason,
    since: f.since,
  };
  const last = jobs.at(-1);
  const older =
    jobs.length === PAGE_SIZE && last
      ? html` · <a href="${ctx.base}${path}${query({ ...keep, before: last.id })}">Older →</a>`
      : '';
  const newest = f.before ? html` · <a href="${ctx.base}${path}${query(keep)}">← Newest</a>` : '';
  return html`<p class="muted">Newest first, ${PAGE_SIZE} a page${f.before ? `, older than #${f.before}` : ''}.${newest}${older}</p>`;
}

/** GET /jobs: every state, filtered; running and waiting jobs can be cancelled, retried now or moved to the DLQ. */
export async function jobsPage(ctx: ConsoleContext, url: URL): Promise<Page> {
  const filters = filtersOf(url, false);
  const jobs = await readJobs(ctx, filters, PAGE_SIZE);
  const canAct = !ctx.session.readOnly && jobs.some((j) => j.state === 'queued' || j.state === 'running');
  const actions = canAct
    ? html`<div class="actions">
        <button name="action" value="retry_now">Retry selected now</button>
        <button name="action" value="cancel">Cancel selected</button>
        <button name="action" value="move_to_dlq">Move selected to DLQ</button></div>`
    : html``;
  return {
    title: 'Jobs',
    section: 'jobs',
    body: html`<h1>Jobs</h1>${filterForm(ctx, '/jobs', filters, false)}
      <form method="post" action="${ctx.base}/actions">${csrfField(ctx)}${actions}${jobTable(ctx, jobs, false, canAct)}</form>
      ${pager(ctx, '/jobs', filters, jobs)}`,
  };
}

/** GET /dlq: dead jobs by kind, queue, reason and time; replay the selected ones, or every match after a dry run. */
export async function dlqPage(ctx: ConsoleContext, url: URL): Promise<Page> {
  const filters = filtersOf(url, true);
  const jobs = await readJobs(ctx, filters, PAGE_SIZE);
  const canAct = !ctx.session.readOnly && jobs.length > 0;
  const hidden = (['kind', 'queue', 'reason', 'since'] as const).map((k) =>
    filters[k] ? html`<input type="hidden" name="${k}" value="${filters[k]}">` : html``,
  );
  const bulk = canAct
    ? html`<form method="post" action="${ctx.base}/actions" class="actions">${csrfField(ctx)}${hidden}
        <button name="action" value="replay_matching" class="primary">Replay all matching…</button>
        <span class="muted">shows what would be replayed first (dry run)</span></form>`
    : html``;
  return {
    title: 'Dead letters',
    section: 'dlq',
    body: html`<h1>Dead letters</h1>${filterForm(ctx, '/dlq', filters, true)}${bulk}
      <form method="post" action="${ctx.base}/actions">${csrfField(ctx)}
      ${canAct ? html`<div class="actions"><button name="action" value="replay">Replay selected</button></div>` : html``}
      ${jobTable(ctx, jobs, true, canAct)}</form>
      ${pager(ctx, '/dlq', filters, jobs)}${
        filters.kind || filters.queue || filters.reason || filters.since
          ? html`<p class="muted"><a href="${ctx.base}/dlq">Clear the filters</a></p>`
          : ''
      }`,
  };
}

const json = (value: unknown) => html`<pre>${JSON.stringify(value, null, 2)}</pre>`;

/** Enqueued, each failed attempt (class, message, response), replays, and where the job is now; oldest first. */
/** Why the job does not run now (explain): each hold with its evidence, or that it is ready. */
function whyPanel(why: JobExplanation | null): Html {
  if (!why || why.state === 'completed' || why.state === 'cancelled') return html``;
  if (why.ready) {
    return html`<div class="notice ok" role="status"><strong>Ready</strong>: ${why.readyAhead ?? 0} ready job(s) of
      queue ${why.queue} are ahead of it; the next claim that reaches it takes it.</div>`;
  }
  return html`<div class="card"><h3>Why it does not run now</h3><ul>${why.holds.map(
    (h) => html`<li><code>${h.reason}</code> ${maskSecretText(h.message)}</li>`,
  )}</ul></div>`;
}

/**
 * What a queued job waits for: a durable sleep or a signal (its last step says, as getJob judged it on
 * the database's clock), else its turn or a retry.
 */
function queuedHead(job: JobRecord): Html {
  const last = job.steps?.at(-1);
  if (last?.state === 'waiting' || last?.state === 'sleeping') return html`${suspendedStep(last)} (step ${last.name})`;
  return html`queued${job.attempt > 0 ? ` for attempt ${job.attempt + 1}` : ''}`;
}

/** A sleep or a wait that has not ended: until when. */
function suspendedStep(step: JobStep): Html {
  const badge = html`<span class="badge running">${step.state}</span>`;
  return step.state === 'sleeping'
    ? html`${badge} until ${formatTime(step.wakeAt)}`
    : html`${badge} for signal <code>${step.signalKey ?? '?'}</code> until ${formatTime(step.timeoutAt)}`;
}

/** The durable steps the job reached, in order (nothing for a job without steps). */
function stepsTable(job: JobRecord): Html {
  const steps = job.steps ?? [];
  if (steps.length === 0) return html``;
  const rows = steps.map((step) => {
    const state =
      step.state === 'waiting' || step.state === 'sleeping'
        ? suspendedStep(step)
        : html`<span class="badge ${step.state === 'failed' ? 'dead' : 'completed'}">${step.state}</span>`;
    const error = step.lastError ? maskSecretText(String(step.lastError.message ?? step.lastError.class ?? '')) : '';
    return html`<tr><td class="n">${step.position + 1}</td><td><code>${step.name}</code></td><td>${step.type}</td>
      <td>${state}</td><td class="n">${step.attempts}</td>
      <td class="n">${step.durationMs === null ? '–' : `${step.durationMs} ms`}</td>
      <td class="n">${step.resultBytes === null ? '–' : `${step.resultBytes} B`}</td>
      <td>${formatTime(step.finishedAt)}</td><td>${error}</td></tr>`;
  });
  return html`<h2>Steps <span class="muted">${steps.length}</span></h2>
    <table><thead><tr><th class="n">#</th><th>Step</th><th>Type</th><th>State</th><th class="n">Attempts</th>
    <th class="n">Duration</th><th class="n">Result</th><th>Finished</th><th>Last error</th></tr></thead>
    <tbody>${rows}</tbody></table>`;
}

function attemptTimeline(job: JobRecord): Html {
  const event = (cls: string, head: Html, at: Date | null, detail: Html | string = '') =>
    html`<li class="${cls}"><strong>${head}</strong> · ${formatTime(at)}${detail ? html`<br>${detail}` : ''}</li>`;
  const failures = job.errors.map((e) => {
    const at = typeof e.at === 'string' || typeof e.at === 'number' ? new Date(e.at) : null;
    const status = e.responseStatus !== undefined ? html` · HTTP ${String(e.responseStatus)}` : html``;
    const holder = typeof e.holder === 'string' ? html` · holder <code>${e.holder}</code>` : html``;
    const body = typeof e.responseBody === 'string' ? html`<pre>${maskSecretText(e.responseBody)}</pre>` : html``;
    return html`<li class="${e.class === 'moved_to_dlq' ? 'info' : ''}"><strong>attempt ${String(e.attempt ?? '?')}</strong>
      · <code>${String(e.class)}</code>${status} · ${formatTime(at)}${holder}<br>${maskSecretText(String(e.message ?? ''))}${body}</li>`;
  });
  const now =
    job.state === 'running'
      ? event(
          'info',
          html`attempt ${job.attempt} running`,
          job.attemptedAt,
          html`lease held by <code>${job.lockedBy ?? '?'}</code> until ${formatTime(job.leaseExpiresAt)}`,
        )
      : job.state === 'queued'
        ? event('info', queuedHead(job), job.runAt, 'runs at this time')
        : event(
            job.state === 'completed' ? 'info' : '',
            html`${job.state}${job.deadReason ? ` (${job.deadReason})` : ''}`,
            job.finishedAt,
          );
  const replayed = job.replayedAt
    ? event('info', html`replayed (${job.replayCount}×)`, job.replayedAt, html`last by <code>${job.replayedBy}</code>`)
    : html``;
  return html`<ol class="timeline">${event('info', html`enqueued`, job.createdAt)}${failures}${replayed}${now}</ol>`;
}

function jobActions(ctx: ConsoleContext, job: JobRecord): Html {
  if (ctx.session.readOnly) return html`<p class="muted">Read-only session: no actions.</p>`;
  const button = (action: string, label: string, cls = '') =>
    html`<form method="post" action="${ctx.base}/actions">${csrfField(ctx)}<input type="hidden" name="id" value="${job.id}">
      <button name="action" value="${action}" class="${cls}">${label}</button></form>`;
  const live = job.state === 'queued' || job.state === 'running';
  const waiting =
    job.state === 'queued' && !waitingForOthers(job) && job.runAt.getTime() > (ctx.now ?? new Date()).getTime();
  return html`<div class="actions">
    ${job.state === 'dead' ? button('replay', 'Replay', 'primary') : html``}
    ${waiting ? button('retry_now', 'Retry now') : html``}
    ${live ? button('cancel', 'Cancel') : html``}
    ${live ? button('move_to_dlq', 'Move to DLQ', 'danger') : html``}</div>`;
}

/** GET /jobs/:id: the payload (masked), the attempt timeline, lease holder, replays, dependencies. */
export async function jobPage(ctx: ConsoleContext, id: string): Promise<Page | null> {
  const job = await withDb(ctx, (db) => getJob(db, id, { schema: ctx.schema }));
  if (!job) return null;
  const why = await withDb(ctx, (db) => explain(db, id, { schema: ctx.schema, jobs: ctx.registry.all() }));
  const link = (ids: string[]) =>
    ids.length === 0 ? '–' : ids.map((i) => html`<a href="${ctx.base}/jobs/${i}">#${i}</a> `);
  const lease =
    job.state === 'running'
      ? html`<code>${job.lockedBy ?? '?'}</code> until ${formatTime(job.leaseExpiresAt)}`
      : job.lockedBy
        ? html`none (last held by <code>${job.lockedBy}</code>)`
        : '–';
  return {
    title: `Job #${job.id}`,
    section: job.state === 'dead' ? 'dlq' : 'jobs',
    body: html`<h1>Job #${job.id} · ${job.kind} ${stateBadge(job)}</h1>${jobActions(ctx, job)}
    <div class="grid"><div class="card"><h3>Job</h3><dl>
      <dt>Queue</dt><dd><a href="${ctx.base}/jobs${query({ queue: job.queue })}">${job.queue}</a></dd>
      <dt>Attempt</dt><dd>${job.attempt} of ${job.maxAttempts}</dd>
      <dt>Priority</dt><dd>${job.priority}</dd>
      <dt>Created</dt><dd>${formatTime(job.createdAt)}</dd>
      <dt>Run at</dt><dd>${runAtText(job)}</dd>
      <dt>Last attempt</dt><dd>${formatTime(job.attemptedAt)}</dd>
      <dt>Finished</dt><dd>${formatTime(job.finishedAt)}</dd>
      ${job.deadReason ? html`<dt>Reason</dt><dd><span class="badge dead">${job.deadReason}</span></dd>` : html``}
      <dt>Deadline</dt><dd>${formatTime(job.deadline)}</dd>
      <dt>Lease</dt><dd>${lease}</dd>
      <dt>Dedupe key</dt><dd>${job.dedupeKey ? html`<code>${job.dedupeKey}</code> (${job.dedupeMode})` : '–'}</dd>
      <dt>Correlation</dt><dd>${job.correlationId ?? '–'}</dd>
      ${why?.origin ? html`<dt>From event</dt><dd><a href="${ctx.base}/events/${why.origin.eventId}">#${why.origin.eventId}</a> ${why.origin.name} (subscription <code>${why.origin.subscription}</code>)</dd>` : html``}
      <dt>Replays</dt><dd>${job.replayCount}${job.replayedAt ? html`, last ${formatTime(job.replayedAt)} by <code>${job.replayedBy}</code>` : ''}</dd>
      <dt>Waits for</dt><dd>${link(job.after)}${job.onParentFailure ? html` <span class="muted">(on parent failure: ${job.onParentFailure})</span>` : ''}</dd>
      <dt>Waited for by</dt><dd>${link(job.dependents)}</dd>
    </dl></div>
    <div class="card"><h3>Payload</h3>${json(shownValue(ctx, job, job.payload))}
      ${job.result !== null && job.result !== undefined ? html`<h3>Result</h3>${json(shownValue(ctx, job, job.result))}` : html``}
      ${job.progress !== null && job.progress !== undefined ? html`<h3>Progress</h3>${json(shownValue(ctx, job, job.progress))}` : html``}
    </div></div>
    ${whyPanel(why)}
    ${stepsTable(job)}
    <h2>Timeline <span class="muted">${job.errors.length} failed attempt(s)</span></h2>${attemptTimeline(job)}`,
  };
}
