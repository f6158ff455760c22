import { InvalidOptionsError } from '../../base/errors.js';
import { type EventRecord, getEvent, isSubscriber, listEvents } from '../../core/events.js';
import { maskPayload, maskSecretKeys } from '../../core/masking.js';
import { type ConsoleContext, query, withDb } from './context.js';
import { formatTime, type Html, html, type Page } from './html.js';

/** The events page (by name, time, no subscriber) and one event's page with its subscribers' jobs. */

const param = (url: URL, name: string) => {
  const value = url.searchParams.get(name)?.trim();
  return value ? value : undefined;
};

/** An event's payload as the console shows it: every path its subscribers mark sensitive, and secret-named keys, masked. */
function shownPayload(ctx: ConsoleContext, event: EventRecord): unknown {
  const paths = ctx.registry
    .all()
    .filter((d) => isSubscriber(d) && d.subscription.event === event.name)
    .flatMap((d) => d.sensitive);
  return maskSecretKeys(maskPayload(event.payload, paths));
}

const subscribersCell = (e: EventRecord): Html =>
  e.subscribers === 0
    ? html`<span class="badge bad" title="no subscription was active for ${e.name} when it was published: nothing ran. A subscriber added later can be replayed it (skiplock events replay)">no subscriber</span>`
    : html`${e.subscribers}`;

/** GET /events: events newest first; `?name=`, `?unsubscribed=1`. */
export async function eventsPage(ctx: ConsoleContext, url: URL): Promise<Page> {
  const name = param(url, 'name');
  const unsubscribed = param(url, 'unsubscribed') === '1';
  const before = param(url, 'before');
  let to: Date | undefined;
  if (before !== undefined) {
    to = new Date(before);
    if (!Number.isFinite(to.getTime()))
      throw new InvalidOptionsError('before must be a date such as 2026-11-23T10:00Z');
  }
  const events = await withDb(ctx, (db) =>
    listEvents(db, { schema: ctx.schema, name, unsubscribed, limit: 100, ...(to ? { to } : {}) }),
  );
  const rows = events.map(
    (e) => html`<tr><td><a href="${ctx.base}/events/${e.id}">#${e.id}</a></td>
      <td><a href="${ctx.base}/events${query({ name: e.name })}">${e.name}</a></td><td>${formatTime(e.publishedAt)}</td>
      <td class="n">${subscribersCell(e)}</td><td class="n">${e.deliveries}</td><td>${e.dedupeKey ?? ''}</td></tr>`,
  );
  const last = events.at(-1);
  return {
    title: 'Events',
    section: 'events',
    body: html`<h1>Events</h1>
      <form class="filters" method="get" action="${ctx.base}/events">
        <label>Name<input name="name" value="${name ?? ''}" placeholder="order.placed"></label>
        <label><input type="checkbox" name="unsubscribed" value="1" ${unsubscribed ? 'checked' : ''}> only with no subscriber</label>
        <button>Filter</button> <a class="button" href="${ctx.base}/events">Clear</a></form>
      ${
        events.length === 0
          ? html`<p class="muted">No events${name || unsubscribed ? ' match' : ' yet'}.</p>`
          : html`<table><thead><tr><th>Event</th><th>Name</th><th>Published</th><th class="n">Subscribers</th>
        <th class="n">Jobs</th><th>Dedupe key</th></tr></thead><tbody>${rows}</tbody></table>`
      }
      ${
        events.length === 100 && last
          ? html`<p><a href="${ctx.base}/events${query({ name, unsubscribed: unsubscribed ? '1' : undefined, before: last.publishedAt.toISOString() })}">Older</a></p>`
          : html``
      }`,
  };
}

/** GET /events/:id: the event, its payload (masked), and each subscriber's job with its state. */
export async function eventPage(ctx: ConsoleContext, id: string): Promise<Page | null> {
  const event = await withDb(ctx, (db) => getEvent(db, id, { schema: ctx.schema }));
  if (!event) return null;
  const jobs = event.jobs.map(
    (j) => html`<tr><td>${j.subscription}</td><td><a href="${ctx.base}/jobs/${j.jobId}">#${j.jobId}</a></td>
      <td>${j.state ? html`<span class="badge ${j.state}">${j.state}</span>` : html`<span class="muted">pruned</span>`}
        ${j.deadReason ? html` <span class="muted">${j.deadReason}</span>` : ''}</td>
      <td class="n">${j.attempt ?? '–'}</td><td>${formatTime(j.deliveredAt)}</td></tr>`,
  );
  return {
    title: `Event #${event.id}`,
    section: 'events',
    body: html`<h1>Event #${event.id} · ${event.name}</h1>
    <div class="grid"><div class="card"><h3>Event</h3><dl>
      <dt>Name</dt><dd><a href="${ctx.base}/events${query({ name: event.name })}">${event.name}</a></dd>
      <dt>Published</dt><dd>${formatTime(event.publishedAt)}</dd>
      <dt>Subscribers</dt><dd>${subscribersCell(event)}</dd>
      <dt>Dedupe key</dt><dd>${event.dedupeKey ? html`<code>${event.dedupeKey}</code>` : '–'}</dd>
    </dl></div>
    <div class="card"><h3>Payload</h3><pre>${JSON.stringify(shownPayload(ctx, event), null, 2)}</pre></div></div>
    <h2>Subscriber jobs <span class="muted">${event.jobs.length}</span></h2>
    ${
      event.jobs.length === 0
        ? html`<p class="muted">No job was written for this event.</p>`
        : html`<table><thead><tr><th>Subscription</th><th>Job</th><th>State</th><th class="n">Attempt</th><th>Written</th></tr></thead>
      <tbody>${jobs}</tbody></table>`
    }`,
  };
}
