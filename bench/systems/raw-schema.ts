import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { connect } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { drainWith } from './raw.js';
import type { BenchSystem } from './types.js';

/**
 * The floor's claim on skiplock's table: $1 batch size, $2 the claim's lease token, $3 the holder. It names
 * `concurrency_key is null`, as skiplock's plain claim does: jobs_claim_idx is partial on it, and
 * without it the floor sorted every queued row per claim (an external sort of 50,000 rows).
 */
export const RAW_SCHEMA_CLAIM = `update skiplock.jobs j set state = 'running', attempt = j.attempt + 1, lease_token = $2,
   lease_expires_at = now() + interval '60 seconds', locked_by = $3,
   started_at = coalesce(j.started_at, now()), attempted_at = now(), updated_at = now()
 where j.id in (select id from skiplock.jobs where state = 'queued' and concurrency_key is null and run_at <= now()
                order by priority, run_at, id limit $1 for update skip locked)
 returning j.id`;

/** The floor's completion, fenced on the token: $1 ids, $2 the lease token. */
export const RAW_SCHEMA_COMPLETE = `update skiplock.jobs set state = 'completed', finished_at = now(), lease_expires_at = null,
   updated_at = now()
 where id = any($1::bigint[]) and lease_token = $2 and state = 'running'`;

/**
 * A second reference: the raw floor's minimal SQL (one claim statement, one completion statement
 * per batch, no library), but on skiplock's own table — its indexes, CHECKs and columns — writing
 * the columns skiplock writes (state, attempt, lease token and expiry, holder, timestamps) and
 * fencing the completion on the token as skiplock does. skiplock ÷ this floor is the cost of the
 * library (statement shape, Node); this floor ÷ the bare one is the cost of the schema.
 */
export function rawSchemaSystem(batch = 100): BenchSystem {
  let url = '';
  let pool: pg.Pool | undefined;
  return {
    name: 'raw (skiplock schema)',
    settings: { batch, completion: 'update', table: 'skiplock.jobs' },
    async setup(target) {
      url = target;
      const db = connect({ connectionString: url, max: 1 });
      await migrate(db);
      await db.close();
      pool = new pg.Pool({ connectionString: url, max: 4 });
    },
    async enqueueSingle(n) {
      for (let i = 0; i < n; i++)
        await (pool as pg.Pool).query(`insert into skiplock.jobs (kind, payload) values ('noop', $1)`, [{ n: i }]);
    },
    async enqueueBulk(n, size) {
      for (let i = 0; i < n; i += size) {
        const payloads = Array.from({ length: Math.min(size, n - i) }, (_, j) => JSON.stringify({ n: i + j }));
        await (pool as pg.Pool).query(`insert into skiplock.jobs (kind, payload) select 'noop', unnest($1::jsonb[])`, [
          payloads,
        ]);
      }
    },
    async process(k) {
      // Each claimer holds its leases under an id as long as skiplock's: an invocation's UUID, or on
      // Lambda its request id. A shorter holder made the floor's rows 40 bytes narrower than skiplock's
      // (196 against 236), and its WAL per job smaller by about as much (bench/history.md item 38).
      const holders = new WeakMap<pg.Client, string>();
      await drainWith(url, k, async (client) => {
        const token = randomUUID();
        const holder = holders.get(client) ?? randomUUID();
        holders.set(client, holder);
        const { rows } = await client.query(RAW_SCHEMA_CLAIM, [batch, token, holder]);
        if (rows.length === 0) return false;
        await client.query(RAW_SCHEMA_COMPLETE, [rows.map((r) => r.id), token]);
        return true;
      });
    },
    async teardown() {
      await pool?.end();
    },
  };
}
