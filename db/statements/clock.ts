import { sql } from 'drizzle-orm';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs } from './common.js';

/**
 * The database's clock (DatabaseNow). A test that supplies its own time (skiplock/testing's
 * TestTime) starts each run from it when it is later, so the jobs enqueued at the database's clock
 * are due.
 */
export async function readDatabaseNow(db: Executor, schema: string): Promise<Date> {
  const rows = await queryRows<{ now_ms: number }>(
    db,
    sql`select ${epochMs(sql`clock_timestamp()`)} as now_ms`,
    schema,
  );
  return new Date(Number(rows[0]?.now_ms));
}
