import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../base/errors.js';
import { defineBatchJob, MAX_BATCH_SIZE } from '../../core/batches.js';
import { defineJob } from '../../core/jobs.js';

const payload = z.object({ n: z.number() });
const base = { kind: 'bulk', payload, batch: { size: 10 } };

/** The options a batch kind refuses, given anyway (from JavaScript, or through a cast). */
const define = (extra: Record<string, unknown>) => () => defineBatchJob({ ...base, ...extra } as never);

describe('defining a batch kind', () => {
  it('keeps the batch settings and the kind defaults', () => {
    const d = defineBatchJob({
      ...base,
      batch: { size: 100, maxWaitMs: 250 },
      handler: (jobs) => jobs.map((j) => j.done()),
    });
    expect(d.batch).toMatchObject({ size: 100, maxWaitMs: 250 });
    expect(typeof d.batch.handler).toBe('function');
    expect(d.handler).toBeUndefined();
    expect(d).toMatchObject({
      kind: 'bulk',
      queue: 'default',
      maxAttempts: 25,
      timeoutMs: 30_000,
      transactional: false,
    });
    expect(defineBatchJob(base).batch.maxWaitMs).toBe(0);
  });

  it.each([
    ['transactional', { transactional: true }, /batch \+ transactional/],
    ['maxSteps', { maxSteps: 10 }, /batch \+ maxSteps: .*durable steps/],
    ['orderingKey', { orderingKey: () => 'k' }, /batch \+ orderingKey: .*per-key order cannot hold/],
    ['orderingOnDead', { orderingOnDead: 'hold' }, /batch \+ orderingOnDead/],
  ])('refuses %s with a ConfigError naming the combination', (_name, extra, message) => {
    expect(define(extra)).toThrow(ConfigError);
    expect(define(extra)).toThrow(message);
  });

  it.each([
    [{ size: 0 }, /batch.size must be an integer from 1 to 1000/],
    [{ size: MAX_BATCH_SIZE + 1 }, /batch.size/],
    [{ size: 2.5 }, /batch.size/],
    [{ size: 10, maxWaitMs: -1 }, /batch.maxWaitMs must be an integer from 0 to 10000/],
    [{ size: 10, maxWaitMs: 10_001 }, /batch.maxWaitMs/],
  ])('refuses batch %o', (batch, message) => {
    expect(define({ batch })).toThrow(message);
  });

  it('refuses a missing batch, and a handler that is not a function', () => {
    expect(define({ batch: undefined })).toThrow(/batch must be an object/);
    expect(define({ handler: 'nope' })).toThrow(/handler must be a function/);
  });

  it('defineJob refuses a batch option and names defineBatchJob', () => {
    expect(() => defineJob({ kind: 'single', payload, batch: { size: 5 } } as never)).toThrow(/defineBatchJob/);
  });

  it('checks the options it shares with defineJob', () => {
    expect(define({ maxAttempts: 0 })).toThrow(/maxAttempts/);
    expect(define({ kind: 'bad kind!' })).toThrow();
  });
});
