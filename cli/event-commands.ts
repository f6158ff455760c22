// Event commands: write the subscriptions at deploy (sync), list and show events, replay them.

import { getEvent, listEvents, listSubscriptions, replayEvents, syncSubscriptions } from '../core/events.js';
import { type CommandContext, str } from './command-context.js';
import { table, when } from './format.js';
import { EXIT, UsageError } from './io.js';

function dateOption(o: Record<string, unknown>, name: string): Date | undefined {
  const v = str(o[name]);
  if (v === undefined) return undefined;
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) throw new UsageError(`--${name} must be a date (ISO 8601)`);
  return d;
}
function limitOption(o: Record<string, unknown>): number | undefined {
  const v = str(o.limit);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new UsageError('--limit must be an integer');
  return n;
}

async function list({ conn, schema, o, emit }: CommandContext): Promise<number> {
  const events = await listEvents(conn, {
    schema,
    name: str(o.name),
    from: dateOption(o, 'from'),
    to: dateOption(o, 'to'),
    unsubscribed: o.unsubscribed === true,
    limit: limitOption(o),
  });
  const rows = events.map((e) => ({
    id: e.id,
    name: e.name,
    published_at: when(e.publishedAt),
    subscribers: e.subscribers === 0 ? '0 (no subscriber)' : String(e.subscribers),
    jobs: String(e.deliveries),
    dedupe_key: e.dedupeKey ?? '',
  }));
  emit(
    rows.length === 0 ? 'no events' : table(rows, ['id', 'name', 'published_at', 'subscribers', 'jobs', 'dedupe_key']),
    events,
  );
  return EXIT.ok;
}

export const EVENT_COMMANDS: Record<string, (ctx: CommandContext) => Promise<number>> = {
  events: list,
  'events list': list,

  async 'events show'({ conn, schema, rest, emit }) {
    const [id] = rest;
    if (!id || !/^[1-9][0-9]{0,18}$/.test(id) || rest.length > 1)
      throw new UsageError('events show needs one event id');
    const event = await getEvent(conn, id, { schema });
    if (!event) {
      emit(`event ${id} does not exist (or was pruned)`, { error: 'not_found', id });
      return EXIT.refused;
    }
    const lines = [
      `event ${event.id}  ${event.name}  published ${when(event.publishedAt)}`,
      `subscribers when published: ${event.subscribers}${event.subscribers === 0 ? ' (no subscriber: nothing ran)' : ''}`,
      ...(event.dedupeKey ? [`dedupe key: ${event.dedupeKey}`] : []),
      `payload: ${JSON.stringify(event.payload)}`,
      `jobs (${event.jobs.length}):`,
      ...event.jobs.map(
        (j) =>
          `  ${j.subscription}: job ${j.jobId} ${j.state ?? 'pruned'}${j.deadReason ? ` (${j.deadReason})` : ''}${
            j.attempt !== null ? `, attempt ${j.attempt}` : ''
          }`,
      ),
    ];
    emit(lines.join('\n'), event);
    return EXIT.ok;
  },

  async 'events replay'({ conn, schema, rest, o, emit }) {
    const [subscription] = rest;
    if (!subscription || rest.length > 1) throw new UsageError('events replay needs one subscription (its kind)');
    const from = dateOption(o, 'from');
    if (!from) throw new UsageError('events replay needs --from (ISO 8601); --to defaults to now');
    const delivered = await replayEvents(conn, {
      schema,
      subscription,
      from,
      to: dateOption(o, 'to'),
      limit: limitOption(o),
    });
    emit(
      delivered.length === 0
        ? `no event in that range is missing for ${subscription}`
        : `${delivered.length} job(s) written for ${subscription}: ${delivered.map((d) => `event ${d.eventId} → job ${d.jobId}`).join(', ')}`,
      delivered,
    );
    return EXIT.ok;
  },

  async 'events subscriptions'({ conn, schema, emit }) {
    const subs = await listSubscriptions(conn, { schema });
    const rows = subs.map((s) => ({
      event: s.event,
      kind: s.kind,
      where: s.where ? JSON.stringify(s.where) : '',
      queue: s.queue,
      active_since: s.retiredAt ? `retired ${when(s.retiredAt)}` : when(s.activeSince),
    }));
    emit(
      rows.length === 0 ? 'no subscriptions' : table(rows, ['event', 'kind', 'where', 'queue', 'active_since']),
      subs,
    );
    return EXIT.ok;
  },

  async sync({ conn, schema, registry, rest, o, emit }) {
    if (rest.length > 0) throw new UsageError('sync takes no arguments');
    if (!registry) throw new UsageError('sync needs --jobs with the module that exports your kinds (its subscribers)');
    const result = await syncSubscriptions(conn, registry, { schema, prune: o.prune === true });
    emit(
      [
        `${result.subscriptions} subscription(s) in the module; written: ${result.written.length === 0 ? 'none (unchanged)' : result.written.join(', ')}`,
        ...(result.retired.length > 0 ? [`retired: ${result.retired.join(', ')}`] : []),
      ].join('\n'),
      result,
    );
    return EXIT.ok;
  },
};

export const EVENT_SUBCOMMANDS = ['events'];
