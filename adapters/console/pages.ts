import { activitySeries, type QueueStatsRow, rollUpActivity, stats } from '../../core/admin.js';
import { breakers } from '../../core/breakers.js';
import { limits, pauses } from '../../core/controls.js';
import { rateLimits } from '../../core/rate-limits.js';
import { errorRateChart, throughputChart } from './charts.js';
import { type ConsoleContext, csrfField, query, withDb } from './context.js';
import { formatAge, formatTime, type Html, html, type Page } from './html.js';

/** The overview (depth per queue and kind, throughput and error-rate charts) and the controls page. */

const HOUR = { bucketSeconds: 60, buckets: 60 };
const DAY = { bucketSeconds: 3600, buckets: 24 };

const percent = (rate: number | null) => (rate === null ? '–' : `${(rate * 100).toFixed(rate < 0.1 ? 1 : 0)}%`);

function statsTable(ctx: ConsoleContext, rows: QueueStatsRow[]): Html {
  if (rows.length === 0) return html`<p class="muted">No jobs yet.</p>`;
  const num = (n: number, href?: string) =>
    html`<td class="n">${n === 0 ? html`<span class="muted">0</span>` : href ? html`<a href="${href}">${n}</a>` : n}</td>`;
  const body = rows.map((r) => {
    const finished = r.completedLastHour + r.deadLastHour;
    const jobs = (state?: string) => `${ctx.base}/jobs${query({ queue: r.queue, kind: r.kind, state })}`;
    return html`<tr><td><a href="${ctx.base}/${query({ queue: r.queue })}">${r.queue}</a>
      ${r.paused ? html` <span class="badge paused" title="paused by ${r.paused.by}">paused</span>` : ''}
      ${r.unserved ? html` <span class="badge bad" title="ready jobs, and no worker served this queue and kind in the last 10 minutes: does a deployed worker list it?">no worker</span>` : ''}
      ${r.unfit ? html` <span class="badge bad" title="ready jobs, and the invocations of every worker that serves this queue are too short for the kind's timeoutMs (the longest has ${r.unfit.budgetMs} ms for attempts): raise the function's timeout or lower the kind's timeoutMs">no worker fits</span>` : ''}</td>
      <td><a href="${jobs()}">${r.kind}</a></td>${num(r.ready, jobs('queued'))}${num(r.scheduled)}${num(r.retryWaiting)}
      ${num(r.waiting)}${num(r.sleeping)}${num(r.waitingForSignal)}${num(r.running, jobs('running'))}
      <td class="n ${r.leaseExpired > 0 ? 'bad' : ''}">${r.leaseExpired}</td>
      ${num(r.dead, `${ctx.base}/dlq${query({ queue: r.queue, kind: r.kind })}`)}
      <td class="n">${formatAge(r.oldestReadyAgeSeconds)}</td><td class="n">${r.completedLastHour}</td>
      <td class="n ${r.deadLastHour > 0 ? 'bad' : ''}">${r.deadLastHour}</td>
      <td class="n">${percent(finished === 0 ? null : r.deadLastHour / finished)}</td></tr>`;
  });
  return html`<table><thead><tr><th>Queue</th><th>Kind</th><th class="n">Ready</th><th class="n">Scheduled</th>
    <th class="n">Retry-waiting</th><th class="n">Waiting</th><th class="n" title="in a durable sleep (ctx.sleep)">Sleeping</th>
    <th class="n" title="waiting for a signal (ctx.waitForSignal)">For signal</th><th class="n">Running</th><th class="n">Expired leases</th>
    <th class="n">Dead</th><th class="n">Oldest ready</th><th class="n">Done 1h</th><th class="n">Dead 1h</th>
    <th class="n">Error rate 1h</th></tr></thead><tbody>${body}</tbody></table>`;
}

/** GET /: every queue and kind, and the last hour's and day's throughput and error rate (all, or `?queue=`). */
export async function overviewPage(ctx: ConsoleContext, url: URL): Promise<Page> {
  const queue = url.searchParams.get('queue')?.trim() || undefined;
  const now = ctx.now;
  const [all, hour, day] = await withDb(ctx, async (db) => {
    // The charts read rolled-up minutes; roll up what closed since maintenance last did.
    await rollUpActivity(db, { schema: ctx.schema, now });
    return Promise.all([
      stats(db, { schema: ctx.schema }),
      activitySeries(db, { schema: ctx.schema, queue, now, ...HOUR }),
      activitySeries(db, { schema: ctx.schema, queue, now, ...DAY }),
    ]);
  });
  const rows = queue ? all.filter((r) => r.queue === queue) : all;
  const queues = [...new Set(all.map((r) => r.queue))];
  const chips = html`<p>Queues: <a href="${ctx.base}/" class="${queue ? '' : 'badge'}">all</a> ${queues.map(
    (q) => html`<a href="${ctx.base}/${query({ queue: q })}" class="${q === queue ? 'badge' : ''}">${q}</a> `,
  )}</p>`;
  const sum = (buckets: typeof hour, key: 'completed' | 'dead') => buckets.reduce((n, b) => n + b[key], 0);
  const card = (title: string, chart: Html, note: string) =>
    html`<div class="card"><h3>${title} <span class="muted">· ${note}</span></h3>${chart}</div>`;
  const scope = queue ? `queue ${queue}` : 'all queues';
  return {
    title: 'Overview',
    section: 'overview',
    body: html`<h1>Overview <span class="muted">${scope}</span></h1>${chips}${statsTable(ctx, rows)}
      <h2>Throughput and errors</h2><div class="grid">
      ${card('Finished per minute, last hour', throughputChart('jobs finished per minute', hour, 60_000), `${sum(hour, 'completed')} completed, ${sum(hour, 'dead')} dead`)}
      ${card('Error rate per minute, last hour', errorRateChart('error rate per minute', hour, 60_000), 'dead ÷ finished')}
      ${card('Finished per hour, last day', throughputChart('jobs finished per hour', day, 3_600_000), `${sum(day, 'completed')} completed, ${sum(day, 'dead')} dead`)}
      ${card('Error rate per hour, last day', errorRateChart('error rate per hour', day, 3_600_000), 'dead ÷ finished')}
      </div><p class="muted">Times in UTC. Completed jobs deleted as they finish (completedJobs: 'delete') count here through their per-minute counts.</p>`,
  };
}

/** GET /flow, the controls: pauses (pause, resume), concurrency limits, circuit breakers (reset), rate limits. */
export async function controlsPage(ctx: ConsoleContext): Promise<Page> {
  const schema = { schema: ctx.schema };
  const [paused, limitRows, health, rates] = await withDb(ctx, (db) =>
    Promise.all([pauses(db, schema), limits(db, schema), breakers(db, schema), rateLimits(db, schema)]),
  );
  const act = !ctx.session.readOnly;
  const form = (fields: Html, label: string, cls = '') =>
    html`<form method="post" action="${ctx.base}/actions">${csrfField(ctx)}${fields}<button class="${cls}">${label}</button></form>`;
  const hidden = (name: string, value: string) => html`<input type="hidden" name="${name}" value="${value}">`;
  const pauseRows = paused.map(
    (p) => html`<tr><td>${p.scope}</td><td>${p.name}</td><td>${formatTime(p.pausedAt)}</td><td>${p.pausedBy}</td>
      <td>${p.reason ?? ''}</td><td>${act ? form(html`${hidden('action', 'resume')}${hidden(p.scope, p.name)}`, 'Resume') : ''}</td></tr>`,
  );
  const pauseForm = act
    ? html`<form method="post" action="${ctx.base}/actions" class="filters">${csrfField(ctx)}${hidden('action', 'pause')}
        <label>Pause<select name="scope"><option value="queue">queue</option><option value="kind">kind</option></select></label>
        <label>Name<input name="name" required></label><label>Reason<input name="reason"></label><button>Pause…</button></form>`
    : html``;
  const limitTable = limitRows.map(
    (
      l,
    ) => html`<tr><td>${l.scope}</td><td>${l.name}</td><td class="n">${l.maxRunning}</td><td class="n">${l.running}</td>
      <td>${l.busiestKey ?? ''}</td><td>${l.setBy}</td><td>${l.reason ?? ''}</td></tr>`,
  );
  const breakerRows = health.map(
    (
      d,
    ) => html`<tr><td>${d.name}</td><td><span class="badge ${d.state === 'closed' ? '' : 'bad'}">${d.state}</span></td>
      <td class="n">${d.failures}/${d.calls}</td><td>${formatTime(d.openedAt)}</td><td>${formatTime(d.nextProbeAt)}</td>
      <td>${formatTime(d.deferredUntil)}</td><td class="n">${d.trips}</td>
      <td>${act && (d.state !== 'closed' || d.deferredUntil) ? form(html`${hidden('action', 'reset_breaker')}${hidden('destination', d.name)}`, 'Reset') : ''}</td></tr>`,
  );
  const rateRows = rates.rateLimits.map(
    (r) => html`<tr><td>${r.scope}</td><td>${r.name}</td><td class="n">${r.maxStarts} per ${r.periodMs / 1000}s</td>
      <td>${r.setBy}</td><td>${r.reason ?? ''}</td></tr>`,
  );
  const table = (head: string[], rows: Html[], empty: string) =>
    rows.length === 0
      ? html`<p class="muted">${empty}</p>`
      : html`<table><thead><tr>${head.map((h) => html`<th>${h}</th>`)}</tr></thead><tbody>${rows}</tbody></table>`;
  return {
    title: 'Controls',
    section: 'flow',
    body: html`<h1>Controls</h1>
      <h2>Pauses</h2>${pauseForm}${table(['Scope', 'Name', 'Since', 'By', 'Reason', ''], pauseRows, 'Nothing is paused.')}
      <h2>Concurrency limits set at run time</h2>${table(['Scope', 'Name', 'Max running', 'Running', 'Busiest key', 'Set by', 'Reason'], limitTable, 'None: the limits in code apply.')}
      <h2>Circuit breakers</h2>${table(['Destination', 'State', 'Failures/calls', 'Opened', 'Next probe', 'Deferred until', 'Trips', ''], breakerRows, 'No destination has been called yet.')}
      <h2>Rate limits set at run time</h2>${table(['Scope', 'Name', 'Rate', 'Set by', 'Reason'], rateRows, 'None: the rates in code apply.')}`,
  };
}
