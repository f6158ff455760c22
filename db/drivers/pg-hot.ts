import pg from 'pg';

/**
 * What the hot statements run under, in a transaction of their own: one generic plan per connection,
 * made at the first run and kept (parse, analysis and planning were ~2 ms of each claim's database
 * time), and a plan of index scans wherever one exists. A generic plan is made from the statistics of
 * its moment and kept until the next ANALYZE; made on a near-empty table, it chose sequential scans
 * and kept them as the table grew (the bench's soak: claim p50 1.7 → 4.8 ms in 90 s). With
 * sequential scans off while it is made, it reads the indexes at any size. SET LOCAL ends with the
 * transaction: nothing reaches the pool's other statements, nor, through a pooler in transaction
 * mode, another client's. Both are read when the statement is bound, which is when it is planned.
 */
export const HOT_PLANS = 'begin; set local plan_cache_mode = force_generic_plan; set local enable_seqscan = off';

/** The rows of a hot statement, or why it failed (a DatabaseError carries its SQLSTATE in `code`). */
type Answer = (error: Error | null, rows?: unknown[]) => void;

/** What of node-postgres's Connection (lib/connection.js) a hot transaction writes with. */
interface WireConnection {
  stream: {
    writable: boolean;
    write(chunk: Buffer): boolean;
    destroy(): void;
    cork?: () => void;
    uncork?: () => void;
  };
  /** Names parsed on this connection, and those sent but not yet answered: the Client keeps both. */
  parsedStatements: Record<string, string>;
  submittedNamedStatements: Record<string, string>;
  parse(query: { name: string; text: string }): void;
  bind(config: { statement: string; values: unknown[] }): void;
}

type Field = { name: string; dataTypeID: number };

/** node-postgres's own parameter conversion (arrays to literals, objects to JSON), as its queries use. */
const { prepareValue } = (pg as unknown as { utils: { prepareValue(value: unknown): unknown } }).utils;

/** A hot statement: its name, its text, its parameters, how its rows' columns are read. */
export interface HotStatement {
  name: string;
  text: string;
  values: unknown[];
  types: pg.CustomTypesConfig;
}

/**
 * A hot statement in a transaction of its own as ONE exchange of the extended protocol: BEGIN, the
 * settings of HOT_PLANS, the named statement and COMMIT, then a single Sync, so the server answers
 * with one ReadyForQuery and node-postgres wakes and settles once, not three times (as three
 * pipelined queries, each with its own Sync and promise, the statement took ~10-20 µs more of
 * Node's CPU: bench/probe-hot.ts). A node-postgres Submittable (lib/client.js): the Client hands it
 * every message of the exchange, and `answer` gets the statement's rows.
 *
 * On an error the server skips to the Sync: the transaction is left aborted (or, when the named
 * statement's Parse failed, never begun), the error reaches `answer` with its SQLSTATE, and
 * withClient's ROLLBACK ends either state.
 *
 * The named statement's Parse, sent only while the connection has not parsed it, goes first (before
 * BEGIN, in the same transaction): the Client records the name as parsed on the next ParseComplete,
 * and that must be its own, not BEGIN's — a statement whose Parse failed would otherwise be bound
 * later without ever having been parsed.
 */
export function hotTransaction(statement: HotStatement, answer: Answer): pg.Submittable {
  const rows: unknown[] = [];
  let columns: { name: string; read: (text: string) => unknown }[] = [];
  let unreadable: unknown;
  let sentOn: WireConnection | undefined;
  let ended = false;
  return {
    name: statement.name,
    text: statement.text,
    // Wrapped by the Client when the pool has a query timeout. Called before the exchange ended, it
    // is that timeout: the answer may never come (a half-open socket), and the ROLLBACK queued behind
    // it would wait as long again. The connection is closed instead, as node-postgres closes one
    // whose pipelined query timed out.
    callback: (error: Error | null, result?: unknown[]) => {
      if (!ended) sentOn?.stream.destroy();
      answer(error, result);
    },
    // Called when the connection is idle; an Error returned is reported before anything is sent.
    submit(client: pg.Connection) {
      const connection = client as unknown as WireConnection;
      sentOn = connection;
      let values: unknown[];
      try {
        values = statement.values.map((value) => prepareValue(value));
      } catch (error) {
        return error;
      }
      const { stream } = connection;
      stream.cork?.();
      try {
        if (connection.parsedStatements[statement.name] === undefined) {
          connection.parse({ name: statement.name, text: statement.text });
          connection.submittedNamedStatements[statement.name] = statement.text;
        }
        send(stream, OPENING);
        connection.bind({ statement: statement.name, values });
        send(stream, CLOSING);
      } finally {
        stream.uncork?.();
      }
    },
    // Only the named statement is described: the other statements' answers carry no rows.
    handleRowDescription(message: { fields: Field[] }) {
      columns = message.fields.map((field) => ({
        name: field.name,
        read: statement.types.getTypeParser(field.dataTypeID, 'text') as (text: string) => unknown,
      }));
    },
    handleDataRow(message: { fields: (string | null)[] }) {
      try {
        const row: Record<string, unknown> = {};
        message.fields.forEach((value, i) => {
          const column = columns[i] as (typeof columns)[number];
          row[column.name] = value === null ? null : column.read(value);
        });
        rows.push(row);
      } catch (error) {
        unreadable ??= error;
      }
    },
    handleCommandComplete() {},
    handleError(error: Error) {
      ended = true;
      this.callback(error);
    },
    handleReadyForQuery() {
      ended = true;
      if (unreadable) this.callback(unreadable as Error);
      else this.callback(null, rows);
    },
    // No empty query, portal left open or COPY: the Client calls nothing else for these statements.
  } as pg.Submittable & { callback: Answer };
}

/** As node-postgres's Connection writes: nothing to a socket that closed (the Client hears of that itself). */
function send(stream: WireConnection['stream'], bytes: Buffer): void {
  if (stream.writable) stream.write(bytes);
}

/** One message of the protocol: its type, its length, its body. */
function message(type: string, body: Buffer): Buffer {
  const bytes = Buffer.alloc(5 + body.length);
  bytes.write(type, 0, 'latin1');
  bytes.writeInt32BE(4 + body.length, 1);
  body.copy(bytes, 5);
  return bytes;
}

/** The unnamed portal: bound with no parameters and text results, described, executed to its end. */
const BIND_UNNAMED = message('B', Buffer.alloc(8));
const DESCRIBE_UNNAMED = message('D', Buffer.from('P\0'));
const EXECUTE_UNNAMED = message('E', Buffer.alloc(5));

/** A statement without parameters or rows as the unnamed statement: Parse, Bind, Execute. */
function unnamed(text: string): Buffer {
  return Buffer.concat([message('P', Buffer.from(`\0${text}\0\0\0`)), BIND_UNNAMED, EXECUTE_UNNAMED]);
}

/** Before the named statement's Bind: HOT_PLANS, one statement at a time. */
const OPENING = Buffer.concat(HOT_PLANS.split('; ').map(unnamed));
/** After it: its Describe and Execute (its portal is the unnamed one), COMMIT, the one Sync. */
const CLOSING = Buffer.concat([DESCRIBE_UNNAMED, EXECUTE_UNNAMED, unnamed('commit'), message('S', Buffer.alloc(0))]);
