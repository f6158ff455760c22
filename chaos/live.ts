import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type pg from 'pg';
import type { EnqueueResult, Enqueuer } from '../core/enqueue.js';
import type { JobRequest } from '../core/jobs.js';
import { replay } from '../core/replay.js';
import { chaosJob, drawBehavior } from './job.js';
import { connectFaulty, type FaultyConnection } from './stand-ins.js';

/**
 * How the live enqueues go: in the caller's transaction with their record (pg, neon-ws), in the
 * caller's neon-http batch with their record, on their own with a dedupe key and sent again blindly
 * until answered, or as a flow on its own whose outcome, when its answer is lost, is read back by its
 * correlation id.
 */
export type LivePath = 'transaction' | 'batch' | 'keyed-one' | 'keyed-many' | 'flow';

/** A window longer than the epoch so far: one job per key for as long as its row is kept. */
const FOREVER_MS = 1_000 * 365 * 24 * 3_600_000;
const recorder = chaosJob({ record: async () => {}, die: () => {}, dieSoon: () => {} });

export interface LiveCounts {
  calls: number;
  jobs: number;
  /** Sends that failed and were sent again (blindly, or after their record said they had not committed). */
  retries: number;
  /** Sends whose answer was lost although they committed (found by their record or correlation id). */
  answersLost: number;
  byPath: Record<string, number>;
}

/**
 * Enqueues `total` more jobs of the plain kind through the driver under test while the faults are
 * on, by every path an application uses, and records each in chaos_enqueued exactly when it
 * committed. Keyed sends are retried blindly: the checker counts any key that got a second job.
 */
export function liveEnqueuer(options: {
  connection: FaultyConnection;
  admin: pg.Pool;
  schema: string;
  enqueuer: Enqueuer;
  total: number;
}) {
  const { admin, schema, enqueuer, connection } = options;
  const db = connectFaulty(connection);
  const s = `"${schema}"`;
  const counts: LiveCounts = { calls: 0, jobs: 0, retries: 0, answersLost: 0, byPath: {} };
  const paths: LivePath[] = db.interactiveTransactions
    ? ['transaction', 'keyed-one', 'keyed-many', 'flow']
    : ['batch', 'keyed-one', 'keyed-many', 'flow'];
  let n = 0;

  const requests = (cid: string, size: number, keyed: boolean): JobRequest[] =>
    Array.from({ length: size }, (_, i) =>
      recorder.with(
        { n: 1_000_000 + n + i, behavior: drawBehavior(Math.random) },
        {
          correlationId: cid,
          ...(keyed ? { dedupe: { key: `${cid}:${i}`, mode: 'window' as const, windowMs: FOREVER_MS } } : {}),
        },
      ),
    );

  /** chaos_enqueued rows for jobs of `cid`, and the call's own row: written with the jobs, or after. */
  const recordSql = (cid: string, path: LivePath, keyed: boolean, attempts: number) =>
    sql`with r as (
        insert into ${sql.identifier(schema)}.chaos_enqueued (job_id, queue, live)
        select j.id, j.queue, true from ${sql.identifier(schema)}.jobs j where j.correlation_id = ${cid}
        on conflict (job_id) do nothing returning 1)
      insert into ${sql.identifier(schema)}.chaos_live_enqueues (correlation_id, path, dedupe_key, attempts)
      select ${cid}, ${path}, ${keyed ? cid : null}, ${attempts} where (select count(*) from r) >= 0
      on conflict (correlation_id) do nothing`;
  /** The same record, written straight to Postgres once the outcome is known (paths sent on their own). */
  const recordAfter = (cid: string, path: LivePath, keyed: boolean, attempts: number) =>
    admin.query(
      `with r as (
         insert into ${s}.chaos_enqueued (job_id, queue, live)
         select j.id, j.queue, true from ${s}.jobs j where j.correlation_id = $1
         on conflict (job_id) do nothing returning 1)
       insert into ${s}.chaos_live_enqueues (correlation_id, path, dedupe_key, attempts)
       select $1, $2, $3, $4 where (select count(*) from r) >= 0
       on conflict (correlation_id) do nothing`,
      [cid, path, keyed ? cid : null, attempts],
    );
  const recorded = async (cid: string) =>
    (await admin.query(`select 1 from ${s}.chaos_live_enqueues where correlation_id = $1`, [cid])).rowCount === 1;
  const committed = async (cid: string) =>
    (await admin.query(`select 1 from ${s}.jobs where correlation_id = $1 limit 1`, [cid])).rowCount === 1;

  const oneCall = async (path: LivePath): Promise<number> => {
    const cid = `live-${randomBytes(6).toString('hex')}`;
    const size = path === 'keyed-one' ? 1 : path === 'flow' ? 2 : 5;
    const keyed = path === 'keyed-one' || path === 'keyed-many';
    for (let attempt = 1; ; attempt++) {
      try {
        if (path === 'transaction') {
          await db.db.transaction(async (tx) => {
            await enqueuer.enqueueMany(tx, requests(cid, size, false));
            await tx.execute(recordSql(cid, path, false, attempt));
          });
        } else if (path === 'batch') {
          const prepared = enqueuer.prepareEnqueue(requests(cid, size, false));
          const batching = db.db as unknown as { batch(queries: unknown[]): Promise<unknown[]> };
          await batching.batch([
            ...prepared.statements.map((q) => db.db.execute(q)),
            db.db.execute(recordSql(cid, path, false, attempt)),
          ]);
        } else {
          let results: EnqueueResult[];
          if (path === 'flow') {
            const [a, b] = requests(cid, 2, false) as [JobRequest, JobRequest];
            const flow = await enqueuer.enqueueFlow(db, { a, b: { ...b, options: { ...b.options, after: ['a'] } } });
            results = [flow.a, flow.b];
          } else {
            results = await enqueuer.enqueueMany(db, requests(cid, size, keyed));
          }
          if (results.some((r) => r.outcome === 'deduplicated')) counts.answersLost++;
          await recordAfter(cid, path, keyed, attempt);
        }
        return size;
      } catch (err) {
        if (attempt >= 200)
          throw new Error(`a live enqueue (${path}) failed ${attempt} times: ${(err as Error).message}`);
        // What the send did, where it can be read: its record (written with it), or its jobs (a flow).
        if (path === 'transaction' || path === 'batch') {
          if (await recorded(cid)) {
            counts.answersLost++;
            return size;
          }
        } else if (path === 'flow' && (await committed(cid))) {
          counts.answersLost++;
          await recordAfter(cid, path, false, attempt);
          return size;
        }
        counts.retries++;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  };

  return {
    /** Enqueues the next call's jobs; false once `total` jobs were enqueued. */
    async next(): Promise<boolean> {
      if (n >= options.total) return false;
      const path = paths[counts.calls % paths.length] as LivePath;
      const size = await oneCall(path);
      n += size;
      counts.calls++;
      counts.jobs += size;
      counts.byPath[path] = (counts.byPath[path] ?? 0) + size;
      return n < options.total;
    },
    counts: () => ({ ...counts, byPath: { ...counts.byPath } }),
    close: () => db.close(),
  };
}

/**
 * Replays up to `max` jobs of the plain kind from the DLQ through the driver under test while the
 * faults are on, each by its id, sent again until answered — unless its `replay_count` shows the
 * failed send committed: a replay of a job no longer dead is refused, but one sent after the job died
 * again would replay it again. The checker counts any job replayed more than once.
 */
export function liveReplayer(options: { connection: FaultyConnection; admin: pg.Pool; schema: string; max: number }) {
  const { admin, schema } = options;
  const db = connectFaulty(options.connection);
  const s = `"${schema}"`;
  let replayed = 0;
  let sends = 0;
  let answersLost = 0;
  /** Whether the last look found a dead job to replay. */
  let found = true;
  return {
    async next(): Promise<void> {
      if (replayed >= options.max) return;
      const { rows } = await admin.query<{ id: string }>(
        `select j.id::text as id from ${s}.jobs j
         where j.state = 'dead' and j.kind = 'chaos' and not exists (select 1 from ${s}.chaos_replays r where r.job_id = j.id)
         order by j.id limit 1`,
      );
      const id = rows[0]?.id;
      found = id !== undefined;
      if (!id) return;
      await admin.query(`insert into ${s}.chaos_replays (job_id, sends) values ($1, 0)`, [id]);
      for (let attempt = 1; attempt <= 200; attempt++) {
        sends++;
        await admin.query(`update ${s}.chaos_replays set sends = sends + 1 where job_id = $1`, [id]);
        try {
          await replay(db, { schema, ids: [id], by: 'chaos', resetAttempts: true });
          break;
        } catch {
          // Did it commit? Then the job is replayed (and may already have died again: a replay sent
          // once more would replay it once more, so it is not sent again).
          const { rows: done } = await admin.query(`select replay_count from ${s}.jobs where id = $1`, [id]);
          if (Number(done[0]?.replay_count ?? 0) > 0) {
            answersLost++;
            break;
          }
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      replayed++;
    },
    counts: () => ({ replayed, sends, answersLost }),
    /** Nothing dead was left to replay at the last look. */
    get idle(): boolean {
      return !found;
    },
    close: () => db.close(),
  };
}
