import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import type { Enqueuer } from '../core/enqueue.js';
import { WAIT_NAME } from './steps-job.js';

interface Pending {
  job_id: string;
  key: string;
  early: boolean;
}

/**
 * The harness's signal sender: each signalled job's signal, exactly once, with a payload of its
 * own (its key and a nonce) that the job must return. It sends through `url` — the fault proxy —
 * in batches, each one transaction that first records its signals in chaos_signals (primary key:
 * the job), then sends them: sent ⇔ recorded. When a batch fails, the records tell whether it
 * committed (a connection lost at the commit); a retry of a batch still in flight on a half-open
 * connection waits on the records' keys, then fails or finds them committed — never a second signal.
 *
 * Each batch checks out its own client and gives it back with its error (a broken connection is
 * dropped): Drizzle's transaction on a pg Pool keeps the client when its BEGIN fails, and nothing
 * listens for a checked-out client's 'error' (a connection dropped mid-transaction) — fatal here.
 */
export function signalSender(options: { url: string; admin: pg.Pool; schema: string; enqueuer: Enqueuer }) {
  const { admin, schema, enqueuer } = options;
  const pool = new pg.Pool({
    connectionString: options.url,
    max: 2,
    statement_timeout: 2_000,
    query_timeout: 2_500,
    connectionTimeoutMillis: 1_000,
  });
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const s = `"${schema}"`;
  const counts = { early: 0, late: 0, retries: 0 };

  const sendBatch = async (batch: Pending[]) => {
    const signals = batch.map((p) => ({ ...p, payload: { key: p.key, nonce: randomBytes(8).toString('hex') } }));
    const ids = signals.map((p) => p.job_id);
    for (let tries = 1; ; tries++) {
      let client: pg.PoolClient | undefined;
      let failed: Error | undefined;
      try {
        client = await pool.connect();
        await drizzle({ client }).transaction(async (tx) => {
          await tx.execute(
            sql`insert into ${sql.identifier(schema)}.chaos_signals (job_id, key, payload, early)
              select r.job_id, r.key, r.payload, r.early
              from jsonb_to_recordset(${JSON.stringify(signals)}::jsonb) as r(job_id bigint, key text, payload jsonb, early boolean)`,
          );
          for (const p of signals) await enqueuer.signal(tx, p.key, p.payload);
        });
        break;
      } catch (err) {
        failed = err as Error;
        const { rows } = await admin.query(`select count(*)::int as n from ${s}.chaos_signals where job_id = any($1)`, [
          ids,
        ]);
        if (rows[0].n === signals.length) break; // it committed; the answer was lost
        if (rows[0].n !== 0) throw new Error(`a batch of ${signals.length} signals committed ${rows[0].n} of them`);
        if (tries >= 200) throw new Error(`signals not sent after ${tries} tries: ${(err as Error).message}`);
        counts.retries++;
        await new Promise((resolve) => setTimeout(resolve, 100));
      } finally {
        client?.release(failed);
      }
    }
    for (const p of signals) counts[p.early ? 'early' : 'late']++;
  };

  const unsent = async (where: string) =>
    (
      await admin.query<Pending>(
        `select e.job_id::text as job_id, e.signal_key as key, e.signal_early as early from ${s}.chaos_enqueued e
         where e.signal_key is not null and not exists (select 1 from ${s}.chaos_signals c where c.job_id = e.job_id)
           and ${where} order by e.job_id`,
      )
    ).rows;

  return {
    /** The early half, before any worker runs: each signal waits for its wait. */
    async sendEarly(): Promise<void> {
      const pending = await unsent('e.signal_early');
      for (let i = 0; i < pending.length; i += 100) await sendBatch(pending.slice(i, i + 100));
    },
    /** The late half, to the jobs seen waiting (the wait's step row); with `all`, every one not sent yet. */
    async sendLate(all: boolean): Promise<void> {
      const pending = await unsent(
        all
          ? 'true'
          : `exists (select 1 from ${s}.job_steps w where w.job_id = e.job_id and w.name = '${WAIT_NAME}' and w.state = 'waiting')`,
      );
      for (let i = 0; i < pending.length; i += 100) await sendBatch(pending.slice(i, i + 100));
    },
    counts: () => ({ ...counts }),
    close: () => pool.end(),
  };
}
