import type { JobRecord } from '../../core/admin.js';
import type { JobRegistry } from '../../core/jobs.js';
import { maskPayload, maskSecretKeys } from '../../core/masking.js';
import type { SkiplockConnection } from '../../db/connect.js';
import type { FunctionRuntime } from '../runtime.js';
import { type Html, html } from './html.js';

/** What a page or an action of a signed-in operator is given. */
export interface ConsoleContext {
  /** Where the console is mounted: '/admin'. */
  base: string;
  session: { who: string; readOnly: boolean; csrf: string };
  /** `console:<name>`: kept as replayed_by / paused_by and logged with every action. */
  by: string;
  client: string;
  runtime: FunctionRuntime;
  schema: string;
  registry: JobRegistry;
  /** The time the database compares with (tests supply it). */
  now?: Date;
}

export const withDb = <T>(ctx: ConsoleContext, fn: (db: SkiplockConnection) => Promise<T>) => ctx.runtime.withDb(fn);

/** A payload (or result) as the console shows it: the kind's sensitive paths and every secret-named key masked. */
export function shownValue(ctx: ConsoleContext, job: JobRecord, value: unknown): unknown {
  const paths = ctx.registry.kinds().includes(job.kind) ? ctx.registry.get(job.kind).sensitive : [];
  return maskSecretKeys(maskPayload(value, paths));
}

/** The hidden field every form of a session carries. */
export const csrfField = (ctx: ConsoleContext) => html`<input type="hidden" name="csrf" value="${ctx.session.csrf}">`;

export function stateBadge(job: Pick<JobRecord, 'state' | 'runAt'>): Html {
  const waiting = job.state === 'queued' && !Number.isFinite(job.runAt.getTime());
  return html`<span class="badge ${job.state}">${waiting ? 'waiting' : job.state}</span>`;
}

/** `?a=1&b=` → a query string of the non-empty values. */
export function query(values: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(values)) if (v) params.set(k, v);
  const text = params.toString();
  return text ? `?${text}` : '';
}
