import { listSchedules } from '../../core/schedules.js';
import { type ConsoleContext, csrfField, query, withDb } from './context.js';
import { formatTime, type Html, html, type Page } from './html.js';

/** At most this many run-time schedules on the page (`?prefix=` narrows them down). */
const PAGE_SIZE = 200;

/** `every 15m` for an interval, the cron otherwise. */
function patternText(cron: string | null, intervalMs: number | null): string {
  if (cron !== null) return cron;
  const ms = intervalMs ?? 0;
  for (const [size, unit] of [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1_000, 's'],
  ] as const) {
    if (ms % size === 0) return `every ${ms / size}${unit}`;
  }
  return `every ${ms}ms`;
}

/** The form that creates a run-time schedule, or replaces the one with the same key. */
function saveForm(ctx: ConsoleContext): Html {
  const kinds = ctx.registry.kinds();
  if (kinds.length === 0) return html``;
  return html`<h2>Create or replace a run-time schedule</h2>
    <form method="post" action="${ctx.base}/actions" class="filters">${csrfField(ctx)}<input type="hidden" name="action" value="schedule_save">
    <label>Key<input name="key" required placeholder="digest:user-42"></label>
    <label>Kind<select name="kind">${kinds.map((k) => html`<option value="${k}">${k}</option>`)}</select></label>
    <label>Cron<input name="cron" placeholder="0 9 * * 1"></label>
    <label>or every (seconds)<input name="every" inputmode="numeric"></label>
    <label>Time zone<input name="timezone" placeholder="UTC"></label>
    <label>Payload (JSON)<input name="payload" placeholder="{}"></label>
    <button>Save…</button></form>`;
}

/**
 * GET /schedules: the code's schedules and the ones the app created at run time, in one list
 * (source), with pause, resume and delete for run-time ones (`?prefix=` for the keys that start so).
 */
export async function schedulesPage(ctx: ConsoleContext, url: URL): Promise<Page> {
  const prefix = url.searchParams.get('prefix')?.trim() || undefined;
  const rows = await withDb(ctx, (db) =>
    listSchedules(db, { schema: ctx.schema, prefix, runtimeLimit: PAGE_SIZE, now: ctx.now }),
  );
  const act = !ctx.session.readOnly;
  const hidden = (name: string, value: string) => html`<input type="hidden" name="${name}" value="${value}">`;
  const form = (action: string, key: string, label: string, cls = '') =>
    html`<form method="post" action="${ctx.base}/actions">${csrfField(ctx)}${hidden('action', action)}${hidden('key', key)}<button class="${cls}">${label}</button></form>`;
  const body: Html[] = rows.map((s) => {
    const runtime = s.source === 'runtime';
    const actions =
      act && runtime
        ? html`${s.pausedAt ? form('schedule_resume', s.name, 'Resume') : form('schedule_pause', s.name, 'Pause')}
          ${form('schedule_delete', s.name, 'Delete', 'danger')}`
        : html``;
    return html`<tr><td>${s.name}</td><td><span class="badge">${s.source}</span>
      ${s.pausedAt ? html` <span class="badge paused" title="paused since ${formatTime(s.pausedAt)}">paused</span>` : ''}</td>
      <td><code>${patternText(s.cron, s.intervalMs)}</code></td><td>${s.timezone}</td>
      <td><a href="${ctx.base}/jobs${query({ kind: s.kind })}">${s.kind}</a></td>
      <td>${formatTime(s.lastOccurrence)}</td><td>${s.pausedAt ? '' : formatTime(s.nextOccurrence)}</td><td>${actions}</td></tr>`;
  });
  const runtimeCount = rows.filter((r) => r.source === 'runtime').length;
  return {
    title: 'Schedules',
    section: 'schedules',
    body: html`<h1>Schedules</h1>
      <form method="get" action="${ctx.base}/schedules" class="filters"><label>Key starts with<input name="prefix" value="${prefix ?? ''}"></label><button>Filter</button></form>
      ${
        rows.length === 0
          ? html`<p class="muted">No schedules: none recorded by a tick and none created at run time.</p>`
          : html`<table><thead><tr><th>Name or key</th><th>Source</th><th>Pattern</th><th>Time zone</th><th>Kind</th>
          <th>Last occurrence</th><th>Next</th><th></th></tr></thead><tbody>${body}</tbody></table>`
      }
      ${act ? saveForm(ctx) : html``}
      <p class="muted">Times in UTC. Code schedules appear once a worker's tick recorded them; run-time schedules
      (createSchedule, applySchedules, <code>skiplock schedules create</code>) are listed by key${
        runtimeCount === PAGE_SIZE ? html`, the first ${PAGE_SIZE} (filter by a key prefix for others)` : ''
      }.</p>`,
  };
}
