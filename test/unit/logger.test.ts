import { describe, expect, it } from 'vitest';
import { toFailureRecord } from '../../core/failure.js';
import { jsonLogger, safeStringify } from '../../core/logger.js';

function capture() {
  const lines: string[] = [];
  return { lines, logger: jsonLogger({ level: 'debug', write: (line) => lines.push(line) }) };
}

describe('log lines and failure records serialize anything, and never throw', () => {
  it('a value referenced twice (not a cycle) is written twice', () => {
    const shared = { a: 1 };
    const { lines, logger } = capture();
    logger.info('m', { x: shared, y: shared, list: [shared, shared] });
    expect(JSON.parse(lines[0] as string)).toMatchObject({ x: { a: 1 }, y: { a: 1 }, list: [{ a: 1 }, { a: 1 }] });
    expect(toFailureRecord({ x: shared, y: shared }, 1).message).toBe('{"x":{"a":1},"y":{"a":1}}');
  });

  it('a real cycle is still marked, and the rest of the line kept', () => {
    const cycle: Record<string, unknown> = { n: 1 };
    cycle.self = cycle;
    const { lines, logger } = capture();
    logger.warn('m', { cycle });
    expect(JSON.parse(lines[0] as string)).toMatchObject({
      level: 'warn',
      msg: 'm',
      cycle: { n: 1, self: '[Circular]' },
    });
    expect(toFailureRecord(cycle, 1).message).toBe('{"n":1,"self":"[Circular]"}');
  });

  it('a bigint is kept exactly (as a string: a JSON number would lose digits)', () => {
    expect(JSON.parse(safeStringify({ id: 12345678901234567891n }))).toEqual({ id: '12345678901234567891' });
  });

  it('keeps the fields in the order they were given, level and message first', () => {
    const { lines, logger } = capture();
    logger.info('m', { zeta: 1, alpha: 2 });
    expect(Object.keys(JSON.parse(lines[0] as string))).toEqual(['level', 'time', 'msg', 'zeta', 'alpha']);
  });

  it('a field that throws while serialized is replaced; the line is still written', () => {
    const { lines, logger } = capture();
    const hostile = {
      toJSON() {
        throw new Error('no');
      },
    };
    expect(() => logger.error('still logged', { jobId: '7', hostile })).not.toThrow();
    expect(JSON.parse(lines[0] as string)).toMatchObject({
      level: 'error',
      msg: 'still logged',
      jobId: '7',
      hostile: expect.stringContaining('no'),
    });
    const trap = new Proxy(
      {},
      {
        ownKeys() {
          throw new Error('trap');
        },
      },
    );
    expect(() => safeStringify(trap)).not.toThrow();
    const getter = Object.defineProperty({}, 'boom', {
      enumerable: true,
      get() {
        throw new Error('getter');
      },
    });
    expect(() => logger.info('fields with a throwing getter', getter)).not.toThrow();
    expect(JSON.parse(lines[lines.length - 1] as string)).toMatchObject({ msg: 'fields with a throwing getter' });
  });
});
