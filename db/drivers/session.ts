/**
 * The pools' `onConnect` hook (awaited before a new connection serves anything): JIT off. A proxy
 * that refuses SET costs nothing but the setting.
 */
export async function jitOff(client: { query(text: string): Promise<unknown> }): Promise<void> {
  await client.query('set jit = off').catch(() => {});
}

/** What safeTransactions needs of a Drizzle session over a pool (node-postgres's and Neon's have it). */
interface PoolSession {
  dialect: unknown;
  schema: unknown;
  options: unknown;
  transaction: (work: (tx: unknown) => Promise<unknown>, config?: unknown) => Promise<unknown>;
}
type Client = { release(err?: Error | boolean): void };
type Tx = { execute(query: unknown): Promise<unknown>; getTransactionConfigSQL(config: unknown): unknown };

/**
 * Replaces a Drizzle pool database's `transaction()` with one that always gives its client back:
 * Drizzle's sends BEGIN outside its try (a BEGIN that fails — the connection dropped under it —
 * never releases the client: a pool of 4 wedges after four, found by the chaos harness) and releases
 * a client whose ROLLBACK failed as healthy. Here a failed BEGIN or ROLLBACK destroys the client.
 * Nested transactions (savepoints) are Drizzle's own, unchanged.
 */
export function safeTransactions(
  database: unknown,
  pool: { connect(): Promise<unknown> },
  make: {
    session: new (client: unknown, dialect: unknown, schema: unknown, options: unknown) => unknown;
    transaction: new (dialect: unknown, session: unknown, schema: unknown) => Tx;
    sql: (strings: TemplateStringsArray, ...values: unknown[]) => unknown;
  },
): void {
  const session = (database as { session: PoolSession }).session;
  session.transaction = async (work, config) => {
    const client = (await pool.connect()) as Client;
    const txSession = new make.session(client, session.dialect, session.schema, session.options);
    const tx = new make.transaction(session.dialect, txSession, session.schema);
    let broken: Error | undefined;
    try {
      await tx.execute(config ? make.sql`begin ${tx.getTransactionConfigSQL(config)}` : make.sql`begin`);
      const result = await work(tx);
      await tx.execute(make.sql`commit`);
      return result;
    } catch (error) {
      await tx.execute(make.sql`rollback`).catch((rollbackError: unknown) => {
        broken = rollbackError instanceof Error ? rollbackError : new Error('rollback failed');
      });
      throw error;
    } finally {
      // A client whose transaction could not be ended is destroyed, never handed out again.
      client.release(broken);
    }
  };
}
