import { describe, expect, it } from 'vitest';
import { DatabaseError, DatabaseUnreachableError, OutcomeUnknownError } from '../../base/errors.js';
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
    expect(messageOf(new ErrorEvent('connect ECONNREFUSED 127.0.0.1:9'))).toBe(
      'cannot reach the database: connect ECONNREFUSED 127.0.0.1:9',
    );
    expect(messageOf(new ErrorEvent('', new Error('socket hang up')))).toMatch(
      /^the connection failed after the statement was sent \(socket hang up\)/,
    );
    expect(messageOf(new ErrorEvent(''))).toBe('ErrorEvent (error)');
    expect(messageOf({})).not.toMatch(/object Object/);
  });

  it('under Drizzle\'s "Failed query" wrapper the event is found (the wrapper would leak parameters)', () => {
    const wrapped = new Error('Failed query: select $1\nparams: secret-payload', {
      cause: new ErrorEvent('connect ECONNREFUSED 127.0.0.1:9'),
    });
    expect(messageOf(wrapped)).toBe('cannot reach the database: connect ECONNREFUSED 127.0.0.1:9');
  });

  it('an empty AggregateError (a host with several addresses) gives its first error', () => {
    const aggregate = new AggregateError([new Error('connect ECONNREFUSED ::1:5432')], '');
    expect(messageOf(aggregate)).toBe('cannot reach the database: connect ECONNREFUSED ::1:5432');
  });

  it('secrets in such a message are scrubbed', () => {
    const message = messageOf(new ErrorEvent('cannot reach postgres://u:hunter2pw@db.example.com/app'));
    expect(message).not.toContain('hunter2pw');
    expect(message).not.toContain('db.example.com');
  });

  it("Deno's and Workers' words for a connection never opened are read as such (neither sets a code)", () => {
    // Neon's HTTP driver in Deno (Supabase, Deno Deploy), the endpoint refusing or unknown: as Deno 2.9 throws.
    const denoFetch = (words: string) =>
      Object.assign(new Error('Error connecting to database: TypeError: fetch failed'), {
        sourceError: new TypeError('fetch failed', {
          cause: new Error(`error sending request for url (https://x.example/sql): client error (Connect): ${words}`),
        }),
      });
    expect(toSkiplockError(denoFetch('tcp connect error: Connection refused (os error 111)'))).toBeInstanceOf(
      DatabaseUnreachableError,
    );
    expect(
      toSkiplockError(denoFetch('dns error: failed to lookup address information: Name or service not known')),
    ).toBeInstanceOf(DatabaseUnreachableError);
    // pg over cloudflare:sockets in workerd, the port closed.
    expect(toSkiplockError(new Error('proxy request failed, cannot connect to the specified address'))).toBeInstanceOf(
      DatabaseUnreachableError,
    );
    // Workers' fetch loses the connection with the same words before and after sending: it may have run.
    const workersFetch = Object.assign(new Error('Error connecting to database: Error: Network connection lost.'), {
      sourceError: new Error('Network connection lost.'),
    });
    expect(toSkiplockError(workersFetch)).toBeInstanceOf(OutcomeUnknownError);
  });

  it('a connection that could not be opened is told apart from one that failed with a statement in flight', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.9:5432'), { code: 'ECONNREFUSED' });
    expect(toSkiplockError(refused, 'skiplock')).toBeInstanceOf(DatabaseUnreachableError);
    expect(toSkiplockError(new Error('timeout exceeded when trying to connect'), 'skiplock')).toBeInstanceOf(
      DatabaseUnreachableError,
    );
    // A login refused: nothing ran.
    const login = Object.assign(new Error('password authentication failed for user "app"'), { code: '28P01' });
    expect(toSkiplockError(login, 'skiplock')).toMatchObject({ code: 'database_unreachable', sqlState: '28P01' });
    // Neon's HTTP driver keeps fetch's error in `sourceError`, and fetch its cause in `cause`.
    const neonLost = Object.assign(new Error('Error connecting to database: TypeError: fetch failed'), {
      sourceError: new TypeError('fetch failed', {
        cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }),
      }),
    });
    expect(toSkiplockError(neonLost, 'skiplock')).toBeInstanceOf(OutcomeUnknownError);
    // fetch refuses some ports outright, before it connects ("bad port").
    const badPort = Object.assign(new Error('Error connecting to database: TypeError: fetch failed'), {
      sourceError: new TypeError('fetch failed', { cause: new Error('bad port') }),
    });
    expect(toSkiplockError(badPort, 'skiplock')).toBeInstanceOf(DatabaseUnreachableError);
    const neonRefused = Object.assign(new Error('Error connecting to database: TypeError: fetch failed'), {
      sourceError: new TypeError('fetch failed', {
        cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:4444'), { code: 'ECONNREFUSED' }),
      }),
    });
    expect(toSkiplockError(neonRefused, 'skiplock')).toBeInstanceOf(DatabaseUnreachableError);
    expect(toSkiplockError(new Error('Connection terminated unexpectedly'), 'skiplock')).toBeInstanceOf(
      OutcomeUnknownError,
    );
    expect(toSkiplockError(new Error('Server error (HTTP status 503): waking'), 'skiplock')).toBeInstanceOf(
      OutcomeUnknownError,
    );
    // A statement that ran and failed (a SQLSTATE) rolled back: neither.
    const failed = Object.assign(new Error('duplicate key'), { code: '23505' });
    expect(toSkiplockError(failed, 'skiplock').code).toBe('database_error');
  });
});
