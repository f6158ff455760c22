import { describe, expect, it } from 'vitest';
import { type TestContext, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('jobs_columns', (ctx) => {
  t = ctx;
});

// PostgreSQL logs an update that stays on its page as the span of the row from the first changed
// byte to the last. A completion writes state, lease_expires_at, finished_at and updated_at: side by
// side they log ~30 bytes; with the claim's columns between them they logged ~100 (keep-mode WAL per
// job 1,284 → 1,223 bytes, bench/history.md item 27).
describe('the jobs table column order', () => {
  it('puts what a completion writes side by side, after what only a claim writes', async () => {
    const { rows } = await t.admin.query<{ name: string }>(
      `select attname as name from pg_attribute
       where attrelid = '"${t.schema}".jobs'::regclass and attnum > 0 and not attisdropped order by attnum`,
    );
    const names = rows.map((r) => r.name);
    const at = names.indexOf('attempt');
    expect(names.slice(at, at + 9)).toEqual([
      'attempt',
      'lease_token',
      'locked_by',
      'started_at',
      'attempted_at',
      'state',
      'lease_expires_at',
      'finished_at',
      'updated_at',
    ]);
  });
});
