import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../base/errors.js';
import { toBackoff } from '../../core/backoff.js';

describe('backoff', () => {
  it('exponential: base × factor^(attempt−1), capped, reduced by at most the jitter fraction', () => {
    const backoff = toBackoff({ type: 'exponential', baseMs: 1_000, factor: 2, maxMs: 10_000, jitter: 0.25 });
    const expected = [1_000, 2_000, 4_000, 8_000, 10_000, 10_000];
    expected.forEach((ceiling, i) => {
      const attempt = i + 1;
      expect(backoff(attempt, null, () => 0)).toBe(ceiling);
      expect(backoff(attempt, null, () => 1)).toBe(ceiling * 0.75);
      for (let k = 0; k < 50; k++) {
        const d = backoff(attempt, null);
        expect(d).toBeGreaterThanOrEqual(ceiling * 0.75);
        expect(d).toBeLessThanOrEqual(ceiling);
      }
    });
  });

  it('defaults to exponential from 1 s, doubling, capped at 1 h, 25% jitter', () => {
    const backoff = toBackoff(undefined);
    expect(backoff(1, null, () => 0)).toBe(1_000);
    expect(backoff(5, null, () => 0)).toBe(16_000);
    expect(backoff(30, null, () => 0)).toBe(3_600_000);
    expect(backoff(30, null, () => 1)).toBe(2_700_000);
  });

  it('constant, with optional jitter', () => {
    expect(toBackoff({ type: 'constant', delayMs: 5_000 })(7, null, () => 0.9)).toBe(5_000);
    expect(toBackoff({ type: 'constant', delayMs: 5_000, jitter: 0.5 })(7, null, () => 1)).toBe(2_500);
  });

  it('custom: receives the attempt and the error; nonsense results are clamped', () => {
    const seen: unknown[] = [];
    const backoff = toBackoff((attempt, error) => {
      seen.push([attempt, error]);
      return attempt === 1 ? 123.4 : attempt === 2 ? -5 : Number.NaN;
    });
    expect(backoff(1, 'e1')).toBe(123);
    expect(backoff(2, 'e2')).toBe(0);
    expect(backoff(3, 'e3')).toBe(0);
    expect(seen).toEqual([
      [1, 'e1'],
      [2, 'e2'],
      [3, 'e3'],
    ]);
  });

  it('rejects impossible settings', () => {
    expect(() => toBackoff({ type: 'exponential', jitter: 2 })).toThrow(ConfigError);
    expect(() => toBackoff({ type: 'exponential', factor: 0.5 })).toThrow(ConfigError);
    expect(() => toBackoff({ type: 'constant', delayMs: -1 })).toThrow(ConfigError);
  });
});
