import { describe, expect, it } from 'vitest';
import { DatabaseError } from '../../base/errors.js';
import { toSkiplockError } from '../../db/execute.js';

/** What ws hands Neon's Pool on a failed connection: an event, not an Error. */
class ErrorEvent {
  readonly type = 'error';
  constructor(
    readonly message: string,
    readonly error?: unknown,
  ) {}
}

const messageOf = (thrown: unknown) => toSkiplockError(thrown, 'skiplock').message;

describe('driver failures that are not Errors become readable DatabaseErrors', () => {
  it('an event is read for its message, its error, then its type; never "[object Object]"', () => {
    expect(toSkiplockError(new ErrorEvent('connect ECONNREFUSED 127.0.0.1:9'), 'skiplock')).toBeInstanceOf(
      DatabaseError,
    );
    expect(messageOf(new ErrorEvent('connect ECONNREFUSED 127.0.0.1:9'))).toBe('connect ECONNREFUSED 127.0.0.1:9');
    expect(messageOf(new ErrorEvent('', new Error('socket hang up')))).toBe('socket hang up');
    expect(messageOf(new ErrorEvent(''))).toBe('ErrorEvent (error)');
    expect(messageOf({})).not.toMatch(/object Object/);
  });

  it('under Drizzle\'s "Failed query" wrapper the event is found (the wrapper would leak parameters)', () => {
    const wrapped = new Error('Failed query: select $1\nparams: secret-payload', {
      cause: new ErrorEvent('connect ECONNREFUSED 127.0.0.1:9'),
    });
    expect(messageOf(wrapped)).toBe('connect ECONNREFUSED 127.0.0.1:9');
  });

  it('an empty AggregateError (a host with several addresses) gives its first error', () => {
    const aggregate = new AggregateError([new Error('connect ECONNREFUSED ::1:5432')], '');
    expect(messageOf(aggregate)).toBe('connect ECONNREFUSED ::1:5432');
  });

  it('secrets in such a message are scrubbed', () => {
    const message = messageOf(new ErrorEvent('cannot reach postgres://u:hunter2pw@db.example.com/app'));
    expect(message).not.toContain('hunter2pw');
    expect(message).not.toContain('db.example.com');
  });
});
