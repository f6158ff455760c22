import { PgDialect } from 'drizzle-orm/pg-core';
import type { Outcome } from '../base/outcomes.js';
import { type ClaimRequest, type ClaimShape, claimStatement } from '../db/statements/claim.js';

/**
 * The claim statement as the database receives it, for each shape the worker sends: written to
 * db/statements/sql/ by `npm run db:dump` and compared with a fresh rendering by a test, so a
 * change to the claim shows in review as a diff of the real SQL. Parameters appear as $n.
 */
export interface RenderedShape {
  name: string;
  /** What the worker declares for this shape to be sent. */
  description: string;
  sql: string;
}

const failure = { class: 'Error', message: 'boom', attempt: 1 };
const settle: Outcome[] = [
  { id: '1', leaseToken: '00000000-0000-0000-0000-000000000001', outcome: 'completed' },
  { id: '2', leaseToken: '00000000-0000-0000-0000-000000000001', outcome: 'retry', delayMs: 1000, error: failure },
  {
    id: '3',
    leaseToken: '00000000-0000-0000-0000-000000000001',
    outcome: 'dead',
    reason: 'max_attempts',
    error: failure,
  },
];
const base: ClaimRequest = {
  leases: [{ kind: 'email', leaseMs: 65_000 }],
  limit: 10,
  invocationId: 'inv',
  keyStart: 0,
};

const SHAPES: { name: string; description: string; shape: ClaimShape; request: ClaimRequest }[] = [
  {
    name: 'plain',
    description:
      "no rule declared; the first claim of an invocation: an empty settle, the steady state's text with completions",
    shape: 'plain',
    request: base,
  },
  {
    name: 'plain-settle',
    description: 'the steady state: the previous batch settled in the same statement (a completion, a retry, a death)',
    shape: 'plain',
    request: { ...base, settle },
  },
  {
    name: 'plain-settle-delete',
    description: "the steady state with completedJobs: 'delete': completed rows deleted and counted per minute",
    shape: 'plain',
    request: { ...base, settle, completion: 'delete' },
  },
  {
    name: 'ordered',
    description: "jobs with an ordering key are unfinished: the plain claim plus each one's turn",
    shape: 'ordered',
    request: { ...base, settle, ordered: true },
  },
  {
    name: 'plain-lane',
    description: 'more than a few invocations of the worker: claims from its lane first',
    shape: 'plain',
    request: { ...base, lane: 3, laneWhen: { worker: 'w', moreThan: 4 } },
  },
  {
    name: 'limited',
    description: 'a concurrency limit declared (or keyed jobs waiting): claim_room decides',
    shape: 'limited',
    request: { ...base, settle, limits: [{ scope: 'queue', name: 'default', maxRunning: 5 }] },
  },
  {
    name: 'rated',
    description: 'a rate limit declared: rate_room decides, record_rate_starts writes the starts',
    shape: 'rated',
    request: { ...base, settle, rateLimits: [{ scope: 'kind', name: 'email', maxStarts: 10, periodMs: 1000 }] },
  },
  {
    name: 'windows',
    description: 'a run window declared',
    shape: 'plain',
    request: {
      ...base,
      windows: [{ scope: 'kind', name: 'email', startMinute: 60, endMinute: 300, timezone: 'Europe/Paris' }],
    },
  },
];

export function renderClaimShapes(): RenderedShape[] {
  const dialect = new PgDialect();
  return SHAPES.map(({ name, description, shape, request }) => {
    const query = dialect.sqlToQuery(
      claimStatement('skiplock', request, shape, '00000000-0000-0000-0000-000000000000'),
    );
    const text = query.sql
      .split('\n')
      .map((line) => line.trimEnd())
      .join('\n');
    return { name, description, sql: `-- claim shape "${name}": ${description}\n${text.trim()}\n` };
  });
}
