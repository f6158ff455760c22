import { sql } from 'drizzle-orm';
import type { AnyPgDatabase } from '../connect.js';
import { queryRows } from '../execute.js';
import { epochMs } from './common.js';

/**
 * The database's clock (DatabaseNow). A test that supplies its own time (skiplock/testing's
 * TestTime) starts each run from it when it is later, so the jobs enqueued at the database's clock
 * are due.
 */
export async function readDatabaseNow(db: AnyPgDatabase, schema: string): Promise<Date> {
  const rows = await queryRows<{ now_ms: number }>(
    db,
    sql`select ${epochMs(sql`clock_timestamp()`)} as now_ms`,
    schema,
  );
  return new Date(Number(rows[0]?.now_ms));
}
