import { describe, expect, it } from 'vitest';
import type { Outcome } from '../../base/outcomes.js';
import { renderSql } from '../../db/render.js';
import { type ClaimRequest, type ClaimShape, claimStatement } from '../../db/statements/claim.js';
import { cachedClaimStatement, cachedSettleStatement } from '../../db/statements/claim-cache.js';
import { settleStatement } from '../../db/statements/settle.js';

const token = (n: number) => `00000000-0000-0000-0000-${String(n).padStart(12, '0')}`;
const completions = (from: number, count: number, tokens = 2): Outcome[] =>
  Array.from({ length: count }, (_, i) => ({
    id: String(from + i),
    leaseToken: token(1 + (i % tokens)),
    outcome: 'completed' as const,
  }));
const withResults = (outcomes: Outcome[]): Outcome[] =>
  outcomes.map((o, i) => (i % 2 === 0 ? { ...o, result: JSON.stringify({ i, text: `it's "${i}"` }) } : o));

const base: ClaimRequest = {
  leases: [
    { kind: 'email', leaseMs: 65_000 },
    { kind: 'sms', leaseMs: 35_000 },
  ],
  limit: 100,
  invocationId: 'inv-1',
};

/** Requests of every form the cache serves, each twice with other values (the second is a hit). */
const served: { name: string; shape: ClaimShape; requests: [ClaimRequest, ClaimRequest] }[] = [
  { name: 'the first claim', shape: 'plain', requests: [base, { ...base, invocationId: 'inv-2' }] },
  {
    name: 'completions riding along',
    shape: 'plain',
    requests: [
      { ...base, settle: completions(1, 100) },
      { ...base, settle: completions(501, 37, 3), invocationId: 'inv-2' },
    ],
  },
  {
    name: 'completions with results',
    shape: 'plain',
    requests: [
      { ...base, settle: withResults(completions(1, 10)) },
      { ...base, settle: withResults(completions(20, 3, 1)) },
    ],
  },
  {
    name: 'delete mode',
    shape: 'plain',
    requests: [
      { ...base, settle: completions(1, 50), completion: 'delete' },
      { ...base, settle: withResults(completions(60, 5)), completion: 'delete' },
    ],
  },
  {
    name: 'a lane, queues and a test clock',
    shape: 'plain',
    requests: [
      {
        ...base,
        settle: completions(1, 4),
        lane: 3,
        laneWhen: { worker: 'w', moreThan: 4 },
        queues: ['a', 'b'],
        now: new Date('2026-01-01T00:00:00Z'),
      },
      {
        ...base,
        settle: completions(9, 2),
        lane: 11,
        laneWhen: { worker: 'v', moreThan: 2 },
        queues: ['c'],
        now: new Date('2026-01-02T03:04:05.678Z'),
      },
    ],
  },
  {
    name: 'the ordered shape',
    shape: 'ordered',
    requests: [
      { ...base, settle: completions(1, 3), ordered: true },
      { ...base, settle: completions(7, 8), ordered: true, limit: 40 },
    ],
  },
];

describe('the cached claim statement', () => {
  it.each(served.map((s) => [s.name, s] as const))(
    'sends the text and parameters the composed statement would: %s',
    (_, { shape, requests }) => {
      for (const [i, request] of requests.entries()) {
        const leaseToken = token(100 + i);
        const cached = cachedClaimStatement('skiplock', request, shape, leaseToken, claimStatement);
        expect(cached, 'served from the cache').toBeDefined();
        const composed = renderSql(claimStatement('skiplock', request, shape, leaseToken));
        expect(renderSql(cached as NonNullable<typeof cached>)).toEqual({ sql: composed.sql, params: composed.params });
      }
    },
  );

  it('composes every other form each time: flow shapes, run windows, failures, ordering keys, destinations', () => {
    const failure = { class: 'Error', message: 'boom', attempt: 1 };
    const others: [ClaimShape, ClaimRequest][] = [
      ['limited', { ...base, limits: [{ scope: 'queue', name: 'default', maxRunning: 5 }] }],
      ['rated', { ...base, rateLimits: [{ scope: 'kind', name: 'email', maxStarts: 10, periodMs: 1000 }] }],
      [
        'plain',
        { ...base, windows: [{ scope: 'kind', name: 'email', startMinute: 60, endMinute: 300, timezone: 'UTC' }] },
      ],
      ['plain', { ...base, settle: [{ id: '1', leaseToken: token(1), outcome: 'retry', delayMs: 5, error: failure }] }],
      ['plain', { ...base, settle: [{ id: '1', leaseToken: token(1), outcome: 'completed', orderingKey: 'k' }] }],
      [
        'plain',
        {
          ...base,
          settle: [
            {
              id: '1',
              leaseToken: token(1),
              outcome: 'completed',
              destination: {
                name: 'api',
                failed: false,
                deferMs: null,
                breaker: { failures: 5, failureRate: 0.5, windowMs: 60_000, coolDownMs: 1000, maxCoolDownMs: 60_000 },
              },
            },
          ],
        },
      ],
    ];
    for (const [shape, request] of others) {
      expect(cachedClaimStatement('skiplock', request, shape, token(1), claimStatement)).toBeUndefined();
    }
  });
});

describe('the cached settle statement (a batch settled on its own)', () => {
  const at = new Date('2026-01-02T03:04:05.678Z');
  it.each([
    ['completions', [completions(1, 500), completions(900, 129, 3)], 'keep', undefined],
    ['completions with results', [withResults(completions(1, 200)), withResults(completions(300, 3, 1))], 'keep', at],
    ['delete mode', [completions(1, 300), withResults(completions(400, 130))], 'delete', undefined],
  ] as const)('sends the text and parameters the composed statement would: %s', (_, batches, completion, now) => {
    for (const outcomes of batches) {
      const cached = cachedSettleStatement('skiplock', outcomes, now, completion, settleStatement);
      expect(cached, 'served from the cache').toBeDefined();
      const composed = renderSql(settleStatement('skiplock', outcomes, now, completion));
      expect(renderSql(cached as NonNullable<typeof cached>)).toEqual({ sql: composed.sql, params: composed.params });
    }
  });

  it('composes every other batch each time: failures, ordering keys, destinations', () => {
    const failure = { class: 'Error', message: 'boom', attempt: 1 };
    const others: Outcome[][] = [
      [...completions(1, 200), { id: '999', leaseToken: token(1), outcome: 'retry', delayMs: 5, error: failure }],
      [{ id: '1', leaseToken: token(1), outcome: 'completed', orderingKey: 'k' }],
      [{ id: '1', leaseToken: token(1), outcome: 'dead', reason: 'discarded', error: failure }],
    ];
    for (const outcomes of others) {
      expect(cachedSettleStatement('skiplock', outcomes, undefined, 'keep', settleStatement)).toBeUndefined();
    }
  });
});
