// Schedules the app creates at run time (docs/schedules.md).
import { sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import type { NodePgDatabase } from 'drizzle-orm/node-postgres';
import {
  applySchedules,
  connect,
  createSchedule,
  createScheduler,
  defineJob,
  deleteSchedule,
  pauseSchedule,
  resumeSchedule,
  upsertSchedule,
} from 'skiplock';
import { z } from 'zod';

const db = connect({ connectionString: process.env.DATABASE_URL! });
declare const appDb: NodePgDatabase;
declare const httpDb: NeonHttpDatabase;
declare const users: { id: string; email: string; timezone: string }[];
declare function sendDigest(userId: string): Promise<void>;

// #region runtime-create
export const weeklyDigest = defineJob({
  kind: 'weekly-digest',
  payload: z.object({ userId: z.string() }),
  handler: async (p) => sendDigest(p.userId),
});

// In the signup's transaction: the schedule exists only if the user does.
await appDb.transaction(async (tx) => {
  await tx.execute(sql`insert into users (id, email) values ('u42', 'ada@example.com')`);
  await createSchedule(tx, {
    key: 'digest:user-u42', // yours: one schedule per key
    job: weeklyDigest, // the payload is checked by the kind's schema now
    cron: '0 9 * * 1', // Mondays 09:00…
    timezone: 'America/New_York', // …in the user's zone, across DST
    payload: { userId: 'u42' },
  });
});

// Poll a feed every 15 minutes until the end of the trial.
await upsertSchedule(db, {
  key: 'feed:acme',
  job: weeklyDigest,
  everyMs: 15 * 60_000,
  endAt: new Date('2027-01-01T00:00:00Z'),
  payload: { userId: 'acme' },
  missed: 'skip', // after downtime: no catch-up
});

await pauseSchedule(db, 'digest:user-u42');
await resumeSchedule(db, 'digest:user-u42'); // from now on: what it missed is not made up
await deleteSchedule(db, 'feed:acme');
// #endregion runtime-create

// #region runtime-apply
// The whole set for one tenant, idempotent: created, rewritten, untouched or deleted as needed.
const result = await applySchedules(
  db,
  'tenant:acme', // the set
  users.map((u) => ({
    key: `digest:user-${u.id}`,
    job: weeklyDigest,
    cron: '0 9 * * 1',
    timezone: u.timezone,
    payload: { userId: u.id },
  })),
);
console.log(result); // { created: [...], updated: [...], unchanged: [...], deleted: [...] }
// #endregion runtime-apply

// #region runtime-batch
// neon-http has no interactive transactions: put the statements in your batch.
const scheduler = createScheduler();
const prepared = scheduler.prepare.createSchedule({
  key: 'digest:user-u43',
  job: weeklyDigest,
  cron: '0 9 * * 1',
  payload: { userId: 'u43' },
});
const [, ...raw] = await httpDb.batch([
  httpDb.execute(sql`insert into users (id, email) values ('u43', 'bob@example.com')`),
  ...prepared.statements.map((s) => httpDb.execute(s)),
]);
console.log(prepared.read(raw)); // { key, outcome: 'created', nextRunAt }
// #endregion runtime-batch
