import { Param, Placeholder, type SQL, sql } from 'drizzle-orm';
import type { Completion, Outcome } from '../../base/outcomes.js';
import { RenderedSql, renderSql } from '../render.js';
import type { ClaimRequest, ClaimShape } from './claim.js';
import { type SettleParams, settleParams } from './settle-params.js';

/**
 * The steady state's claim — the plain or the ordered shape, with the previous batch's completions
 * riding along — rendered once per form and then only filled in. Composing the statement from its
 * Drizzle fragments and rendering it cost ~0.5 ms of Node's time per claim (about half of the
 * worker's own time per job at batches of 100), for a text that changes only with the form: the
 * shape, the kinds and their leases, the limit, which options are given, and whether completions
 * carry results. What changes from claim to claim (the lease token, the lane, the outcomes' ids and
 * tokens…) is a placeholder in the cached render, filled for each claim.
 *
 * Other forms (the limited and rated shapes, run windows, outcomes other than completions, ordering
 * keys or destinations among them) are composed each time, as before. The text and parameters are
 * the same either way (test/unit/claim-cache.test.ts compares them).
 */

/** What a cached claim takes anew each time it is sent. */
const SLOTS = [
  'leaseToken',
  'invocationId',
  'now',
  'queues',
  'lane',
  'laneWorker',
  'laneMoreThan',
  'tokens',
  'ids',
  'tokenAt',
  'results',
] as const;
type Slot = (typeof SLOTS)[number];
const isSlot = (name: string): name is Slot => (SLOTS as readonly string[]).includes(name);

/** One form's render: its text, its parameters (a slot's are placeholders), and where the slots go. */
interface Form {
  text: string;
  params: unknown[];
  slots: [position: number, slot: Slot][];
}

/**
 * What the outcomes riding along look like: completions (or none: an invocation's first claim carries
 * an empty settle, the same text), completions some with a result.
 */
type SettleForm = 'completed' | 'results';

/** Outcomes of each settle form, for the one render (their values are placeholders: SettleParams). */
const FORM_OUTCOMES: Record<SettleForm, readonly Outcome[]> = {
  completed: [{ id: '0', leaseToken: '', outcome: 'completed' }],
  results: [{ id: '0', leaseToken: '', outcome: 'completed', result: 'null' }],
};

/** Forms kept per process, the least recently used dropped first (a form is a few KB of text). */
const MAX_FORMS = 128;
const forms = new Map<string, Form>();

type BuildClaim = (
  schema: string,
  request: ClaimRequest,
  shape: ClaimShape,
  leaseToken: string,
  settleParams?: SettleParams,
) => SQL;

/**
 * The claim `build` would compose for this request, from the cache when its form is one the cache
 * serves; undefined otherwise (compose it).
 */
export function cachedClaimStatement(
  schema: string,
  request: ClaimRequest,
  shape: ClaimShape,
  leaseToken: string,
  build: BuildClaim,
): SQL | undefined {
  if (shape !== 'plain' && shape !== 'ordered') return undefined;
  if ((request.windows?.length ?? 0) > 0) return undefined;
  const settle = request.settle ?? [];
  const settleForm = settleFormOf(settle);
  if (settleForm === undefined) return undefined;
  const key = [
    schema,
    shape,
    settleForm,
    request.completion ?? 'keep',
    request.limit,
    request.now ? 'now' : '',
    request.queues ? 'queues' : '',
    request.lane === undefined ? '' : 'lane',
    request.laneWhen ? 'laneWhen' : '',
    JSON.stringify(request.leases),
  ].join('\u0000');
  return filled(key, () => renderForm(schema, request, shape, settleForm, build), request, leaseToken, settle);
}

type BuildSettle = (
  schema: string,
  outcomes: readonly Outcome[],
  now: Date | Placeholder | undefined,
  completion: Completion,
  params?: SettleParams,
) => SQL;

/**
 * settleOutcomes's statement from the cache, for completions alone (a batch larger than the claim
 * takes along is settled by a statement of its own: composing it cost more than the claim's).
 */
export function cachedSettleStatement(
  schema: string,
  outcomes: readonly Outcome[],
  now: Date | undefined,
  completion: Completion,
  build: BuildSettle,
): SQL | undefined {
  const settleForm = settleFormOf(outcomes);
  if (settleForm === undefined) return undefined;
  const key = [schema, 'settle', settleForm, completion, now ? 'now' : ''].join('\u0000');
  const render = () =>
    formOf(build(schema, FORM_OUTCOMES[settleForm], now && slot('now'), completion, settlePlaceholders()));
  return filled(key, render, { now } as ClaimRequest, '', outcomes);
}

/** The statement of a form, rendered at its first use, with this request's values in its slots. */
function filled(
  key: string,
  render: () => Form,
  request: ClaimRequest,
  leaseToken: string,
  settle: readonly Outcome[],
): SQL {
  let form = forms.get(key);
  if (form) {
    forms.delete(key); // to the end: the most recently used
  } else {
    form = render();
    if (forms.size >= MAX_FORMS) forms.delete(forms.keys().next().value as string);
  }
  forms.set(key, form);
  const settled = settleParams(settle);
  const params = form.params.slice();
  for (const [position, slot] of form.slots) {
    params[position] = slotValue(slot, request, leaseToken, settled);
  }
  return new RenderedSql(form.text, params);
}

function slotValue(slot: Slot, request: ClaimRequest, leaseToken: string, settled: SettleParams): unknown {
  switch (slot) {
    case 'leaseToken':
      return leaseToken;
    case 'invocationId':
      return request.invocationId;
    case 'now':
      return request.now?.toISOString();
    case 'queues':
      return request.queues;
    case 'lane':
      return request.lane;
    case 'laneWorker':
      return request.laneWhen?.worker;
    case 'laneMoreThan':
      return request.laneWhen?.moreThan;
    case 'tokens':
      return settled.tokens;
    case 'ids':
      return settled.ids;
    case 'tokenAt':
      return settled.tokenAt;
    case 'results':
      return settled.results;
  }
}

/** The settle form of these outcomes, or undefined when the cache does not serve it. */
function settleFormOf(settle: readonly Outcome[]): SettleForm | undefined {
  let form: SettleForm = 'completed';
  for (const o of settle) {
    if (o.outcome !== 'completed' || o.orderingKey || o.destination) return undefined;
    if (o.result !== undefined) form = 'results';
  }
  return form;
}

/** Renders the statement of a form once, with placeholders for its slots. */
function renderForm(
  schema: string,
  request: ClaimRequest,
  shape: ClaimShape,
  settleForm: SettleForm,
  build: BuildClaim,
): Form {
  const template: ClaimRequest = {
    ...request,
    invocationId: slot('invocationId'),
    now: request.now ? slot('now') : undefined,
    queues: request.queues ? slot('queues') : undefined,
    lane: request.lane === undefined ? undefined : slot('lane'),
    laneWhen: request.laneWhen ? { worker: slot('laneWorker'), moreThan: slot('laneMoreThan') } : undefined,
    settle: FORM_OUTCOMES[settleForm],
  };
  return formOf(build(schema, template, shape, slot('leaseToken'), settlePlaceholders()));
}

const slot = <T>(name: Slot): T => sql.placeholder(name) as unknown as T;

const settlePlaceholders = (): SettleParams => ({
  tokens: slot('tokens'),
  ids: slot('ids'),
  tokenAt: slot('tokenAt'),
  results: slot('results'),
});

/** A statement rendered with placeholders: its text, its parameters, and where the slots go. */
function formOf(statement: SQL): Form {
  const { sql: text, params } = renderSql(statement);
  const slots: Form['slots'] = [];
  params.forEach((param, position) => {
    const value = param instanceof Param ? param.value : param;
    if (!(value instanceof Placeholder)) return;
    if (!isSlot(value.name)) throw new Error(`claim cache: unknown placeholder ${value.name}`);
    slots.push([position, value.name]);
  });
  return { text, params, slots };
}
