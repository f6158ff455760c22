import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type pg from 'pg';
import type { Enqueuer } from '../core/enqueue.js';
import { connectFaulty, type FaultyConnection } from './stand-ins.js';
import { WAIT_NAME } from './steps-job.js';

interface Pending {
  job_id: string;
  key: string;
  early: boolean;
}

/**
 * The harness's signal sender: each signalled job's signal, exactly once, with a payload of its
 * own (its key and a nonce) that the job must return. It sends through the driver under test and its
 * faulty stand-in, in batches, each one transaction (a neon-http batch) that records its signals in
 * chaos_signals (primary key: the job) and sends them, each with an id of its own: sent ⇔ recorded.
 * When a batch fails, half the time the records tell whether it committed (an answer lost after the
 * commit); the other half it is sent again blindly, which the signals' ids make safe — a second send
 * stores nothing. Either way the checker counts a key with other than one signal as lost.
 */
export function signalSender(options: {
  connection: FaultyConnection;
  admin: pg.Pool;
  schema: string;
  enqueuer: Enqueuer;
}) {
  const { admin, schema, enqueuer, connection } = options;
  const db = connectFaulty(connection);
  const s = `"${schema}"`;
  const counts = { early: 0, late: 0, retries: 0, blindRetries: 0, answersLost: 0 };
  let someWaited = false;

  const record = (signals: (Pending & { payload: unknown })[]) =>
    sql`insert into ${sql.identifier(schema)}.chaos_signals (job_id, key, payload, early)
      select r.job_id, r.key, r.payload, r.early
      from jsonb_to_recordset(${JSON.stringify(signals)}::jsonb) as r(job_id bigint, key text, payload jsonb, early boolean)
      on conflict (job_id) do nothing`;

  const send = async (signals: (Pending & { payload: unknown })[]) => {
    if (db.interactiveTransactions) {
      await db.db.transaction(async (tx) => {
        await tx.execute(record(signals));
        for (const p of signals) await enqueuer.signal(tx, p.key, p.payload, { id: `chaos-${p.job_id}` });
      });
      return;
    }
    const batching = db.db as unknown as { batch(queries: unknown[]): Promise<unknown[]> };
    await batching.batch([
      db.db.execute(record(signals)),
      ...signals.flatMap((p) =>
        enqueuer.prepareSignal(p.key, p.payload, { id: `chaos-${p.job_id}` }).statements.map((q) => db.db.execute(q)),
      ),
    ]);
  };

  const sendBatch = async (batch: Pending[]) => {
    const signals = batch.map((p) => ({ ...p, payload: { key: p.key, nonce: randomBytes(8).toString('hex') } }));
    const ids = signals.map((p) => p.job_id);
    const blind = Math.random() < 0.5;
    for (let tries = 1; ; tries++) {
      try {
        await send(signals);
        break;
      } catch (err) {
        if (tries >= 200) throw new Error(`signals not sent after ${tries} tries: ${(err as Error).message}`);
        if (blind) {
          counts.blindRetries++;
        } else {
          const { rows } = await admin.query(
            `select count(*)::int as n from ${s}.chaos_signals where job_id = any($1)`,
            [ids],
          );
          if (rows[0].n === signals.length) {
            counts.answersLost++;
            break; // it committed; the answer was lost
          }
          if (rows[0].n !== 0) throw new Error(`a batch of ${signals.length} signals committed ${rows[0].n} of them`);
          counts.retries++;
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
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
    /**
     * The late half, to the jobs seen waiting (the wait's step row); with `all`, every one not sent
     * yet — but only once some job has waited for its signal: on a slow machine the fault phase can
     * end before any stepped job reaches its wait, and sending every signal then would leave the
     * waiting path untried (the checker's `waited` 0). Until then `all` sends to the waiting ones.
     */
    async sendLate(all: boolean): Promise<void> {
      if (all && !someWaited) {
        const { rows } = await admin.query(
          `select exists (select 1 from ${s}.chaos_step_history where name = '${WAIT_NAME}' and new_state = 'waiting') as w`,
        );
        someWaited = rows[0].w === true;
      }
      const pending = await unsent(
        all && someWaited
          ? 'true'
          : `exists (select 1 from ${s}.job_steps w where w.job_id = e.job_id and w.name = '${WAIT_NAME}' and w.state = 'waiting')`,
      );
      for (let i = 0; i < pending.length; i += 100) await sendBatch(pending.slice(i, i + 100));
    },
    counts: () => ({ ...counts }),
    close: () => db.close(),
  };
}
