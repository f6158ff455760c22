import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { z } from 'zod';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { connect } from '../../db/connect.js';
import { applyMigrations, migrate } from '../../db/migrate.js';
import type { Migration } from '../../db/migration-plan.js';
import { MIGRATIONS } from '../../db/migrations.generated.js';

/**
 * An upgrade under load: a jobs table with `rows` rows, two workers claiming and completing, an
 * enqueuer enqueuing every few milliseconds, and a long read open on `jobs` (a report, a pg_dump)
 * when a migration of every shape that touches a busy table arrives — a column, a CHECK, its
 * validation, an index. `online` applies it with skiplock's migrator (steps under lock_timeout,
 * NOT VALID then VALIDATE, CREATE INDEX CONCURRENTLY); `blocking` applies the same change the way
 * the pre-release migrator did (one transaction, no lock_timeout, a validating CHECK, a plain
 * index build), for comparison. It measures the longest an enqueue waited, and checks that every
 * job enqueued ran exactly once.
 */
export type UpgradeMode = 'online' | 'blocking';

export interface UpgradeDrillOptions {
  databaseUrl: string;
  rows: number;
  /** One enqueue every this many ms. */
  enqueueEveryMs: number;
  lockTimeoutMs: number;
  /** When each phase ends: after a time in `npm run drill:upgrade`, on an event in a test. */
  phases: DrillPhases;
  progress?: (line: string) => void;
}

/** What the drill has seen so far, for the phases to decide when they end. */
export interface DrillState {
  /** Enqueues committed. */
  enqueued(): number;
  /** Lock waits the online migrator gave up. */
  lockRetries(): number;
  /** Whether an enqueue has been seen waiting for a lock behind the migration (pg_blocking_pids). */
  blockSeen(): boolean;
  /** Enqueues committed since an enqueue was first seen waiting behind the migration. */
  enqueuedSinceBlock(): number;
}

export interface DrillPhases {
  /** Load alone, before the read opens and again after the migration ended. */
  settle(state: DrillState): Promise<void>;
  /** From the read's start to the migration's. */
  migrateAfter(state: DrillState): Promise<void>;
  /** From the read's start: the read commits when this resolves (never before the migration started). */
  holdRead(state: DrillState): Promise<void>;
}

/** The phases of `npm run drill:upgrade`: a read open `readMs`, the migration `migrateAfterMs` into it. */
export function timedPhases(times: { readMs: number; migrateAfterMs: number; settleMs: number }): DrillPhases {
  return {
    settle: () => wait(times.settleMs),
    migrateAfter: () => wait(times.migrateAfterMs),
    holdRead: () => wait(times.readMs),
  };
}

export interface UpgradeDrillResult {
  mode: UpgradeMode;
  rows: number;
  read_s: number;
  migration_s: number;
  lock_retries: number;
  enqueued: number;
  /**
   * Enqueues committed after one was seen waiting behind the migration and before the read ended:
   * with the online migrator they keep coming (it gives up its lock wait); the blocking way, none.
   */
  enqueued_behind_migration: number;
  /** Enqueues that failed (none may: a failed enqueue is work the caller has to redo). */
  enqueue_errors: number;
  max_enqueue_wait_ms: number;
  p99_enqueue_wait_ms: number;
  lost: number;
  ran_twice: number;
  worker_errors: number;
  worker_deadlines: number;
}

export const UPGRADE_FULL = {
  rows: 1_000_000,
  /** How long the read on jobs stays open; the migration arrives `migrateAfterMs` into it. */
  readMs: 15_000,
  migrateAfterMs: 1_000,
  settleMs: 2_000,
  enqueueEveryMs: 10,
  lockTimeoutMs: 1_000,
} as const;

/** The drill's migration, in skiplock's online form (the migration linter passes it). */
export const DRILL_MIGRATION_STATEMENTS = [
  'ALTER TABLE "skiplock"."jobs" ADD COLUMN "drill_note" text;',
  'ALTER TABLE "skiplock"."jobs" ADD CONSTRAINT "jobs_drill_note_check" CHECK (drill_note IS NULL OR length(drill_note) < 1000) NOT VALID;',
  'ALTER TABLE "skiplock"."jobs" VALIDATE CONSTRAINT "jobs_drill_note_check";',
  'CREATE INDEX CONCURRENTLY IF NOT EXISTS "jobs_drill_kind_created_idx" ON "skiplock"."jobs" USING btree ("kind","created_at");',
];

/** The same change as the pre-release migrator applied it: one transaction, every lock held to the end. */
const BLOCKING_STATEMENTS = [
  'ALTER TABLE "skiplock"."jobs" ADD COLUMN "drill_note" text',
  'ALTER TABLE "skiplock"."jobs" ADD CONSTRAINT "jobs_drill_note_check" CHECK (drill_note IS NULL OR length(drill_note) < 1000)',
  'CREATE INDEX "jobs_drill_kind_created_idx" ON "skiplock"."jobs" USING btree ("kind","created_at")',
];

const DRILL_MIGRATION: Migration = {
  tag: '0001_upgrade_drill',
  hash: createHash('sha256').update(DRILL_MIGRATION_STATEMENTS.join('\n')).digest('hex'),
  statements: DRILL_MIGRATION_STATEMENTS,
  objectsFrom: 0,
};

const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export async function runUpgradeDrill(options: UpgradeDrillOptions, mode: UpgradeMode): Promise<UpgradeDrillResult> {
  const say = options.progress ?? (() => {});
  const schema = `upgrade_${randomBytes(4).toString('hex')}`;
  // Named connections: the drill watches the enqueuer's wait behind the migration in pg_stat_activity.
  const named = (who: string) => {
    const url = new URL(options.databaseUrl);
    url.searchParams.set('application_name', `${schema}_${who}`);
    return url.toString();
  };
  const admin = new pg.Pool({ connectionString: options.databaseUrl, max: 3 });
  admin.on('error', () => {});
  const setup = connect({ connectionString: named('migrate'), max: 2 });
  // No timeouts on the enqueuer: the drill measures how long an enqueue waits, however long.
  const enqueuerDb = connect({
    connectionString: named('enqueue'),
    max: 2,
    statementTimeoutMs: 0,
    queryTimeoutMs: 0,
  });
  const workerDbs = [0, 1].map(() => connect({ connectionString: options.databaseUrl, max: 3 }));
  const runs = new Map<number, number>();
  const tick = defineJob({
    kind: 'tick',
    payload: z.object({ n: z.number().int() }),
    timeoutMs: 2_000,
    handler: async ({ n }) => {
      runs.set(n, (runs.get(n) ?? 0) + 1);
    },
  });
  try {
    await migrate(setup, { schema });
    say(`  ${mode}: writing ${options.rows.toLocaleString('en')} completed jobs`);
    for (let done = 0; done < options.rows; done += 200_000) {
      await admin.query(
        `insert into "${schema}".jobs (kind, state, attempt, started_at, finished_at, attempted_at)
         select 'history', 'completed', 1, now(), now(), now() from generate_series(1, $1)`,
        [Math.min(200_000, options.rows - done)],
      );
    }
    await admin.query(`vacuum analyze "${schema}".jobs`);

    let stop = false;
    const summaries = { errors: 0, deadlines: 0 };
    const workers = workerDbs.map(async (db) => {
      const worker = createWorker({ db, schema, jobs: [tick], concurrency: 10, batchSize: 10, logger: silentLogger });
      while (!stop) {
        const summary = await worker.runInvocation({ remainingMs: 10_000 });
        if (summary.stoppedBecause === 'error') summaries.errors++;
        if (summary.stoppedBecause === 'deadline') summaries.deadlines++;
        if (summary.claimed === 0) await wait(20);
      }
    });
    const waits: number[] = [];
    const committed: number[] = [];
    let enqueueErrors = 0;
    let enqueuing = true;
    const enqueuer = (async () => {
      const enqueue = createEnqueuer({ schema });
      for (let n = 0; enqueuing; n++) {
        const started = performance.now();
        try {
          await enqueue.enqueue(enqueuerDb, tick, { n });
          committed.push(n);
        } catch {
          enqueueErrors++;
        }
        waits.push(performance.now() - started);
        await wait(options.enqueueEveryMs);
      }
    })();

    let lockRetries = 0;
    let enqueuedAtBlock: number | undefined;
    const state: DrillState = {
      enqueued: () => committed.length,
      lockRetries: () => lockRetries,
      blockSeen: () => enqueuedAtBlock !== undefined,
      enqueuedSinceBlock: () => (enqueuedAtBlock === undefined ? 0 : committed.length - enqueuedAtBlock),
    };

    await options.phases.settle(state);
    const reader = await admin.connect();
    await reader.query(`begin; select count(*) from "${schema}".jobs`);
    const readStarted = Date.now();
    say(`  ${mode}: a read holds jobs open; the migration arrives behind it`);
    // While the read is open: has an enqueue been seen waiting for a lock the migration waits for?
    let reading = true;
    const watching = (async () => {
      while (reading && enqueuedAtBlock === undefined) {
        const { rows } = await admin.query(
          `select 1 from pg_stat_activity e join pg_stat_activity m on m.pid = any(pg_blocking_pids(e.pid))
           where e.application_name = $1 and m.application_name = $2`,
          [`${schema}_enqueue`, `${schema}_${mode === 'online' ? 'migrate' : 'blocking'}`],
        );
        // Counted after the look: the enqueue seen waiting has not committed yet.
        if (rows.length > 0) enqueuedAtBlock = committed.length;
        else await wait(10);
      }
    })();
    const holding = options.phases.holdRead(state);
    await options.phases.migrateAfter(state);
    const migrationStarted = Date.now();
    const migrating = (async () => {
      if (mode === 'online') {
        await applyMigrations(setup, [MIGRATIONS[0] as Migration, DRILL_MIGRATION], {
          schema,
          lockTimeoutMs: options.lockTimeoutMs,
          retryDelayMs: 250,
          lockAttempts: 100,
          onProgress: (event) => {
            if (event.type === 'lock_timeout') lockRetries++;
          },
        });
      } else {
        const client = new pg.Client({ connectionString: named('blocking') });
        await client.connect();
        try {
          await client.query('begin');
          for (const statement of BLOCKING_STATEMENTS)
            await client.query(statement.replaceAll('"skiplock"', `"${schema}"`));
          await client.query('commit');
        } finally {
          await client.end();
        }
      }
      return Date.now() - migrationStarted;
    })();
    await holding;
    const enqueuedBehindMigration = state.enqueuedSinceBlock();
    reading = false;
    await reader.query('commit');
    const readMs = Date.now() - readStarted;
    reader.release();
    await watching;
    const migrationMs = await migrating;
    say(`  ${mode}: migration took ${(migrationMs / 1000).toFixed(1)} s (${lockRetries} lost lock waits)`);
    await options.phases.settle(state);
    enqueuing = false;
    await enqueuer;
    const enqueued = committed.length;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const { rows } = await admin.query(
        `select count(*)::int as n from "${schema}".jobs where kind = 'tick' and state in ('queued', 'running')`,
      );
      if (rows[0].n === 0) break;
      await wait(100);
    }
    stop = true;
    await Promise.all(workers);
    const sorted = [...waits].sort((a, b) => a - b);
    const lost = committed.filter((n) => !runs.has(n)).length;
    return {
      mode,
      rows: options.rows,
      read_s: Math.round(readMs / 100) / 10,
      enqueue_errors: enqueueErrors,
      migration_s: Math.round(migrationMs / 100) / 10,
      lock_retries: lockRetries,
      enqueued,
      enqueued_behind_migration: enqueuedBehindMigration,
      max_enqueue_wait_ms: Math.round(sorted.at(-1) ?? 0),
      p99_enqueue_wait_ms: Math.round(sorted[Math.floor(sorted.length * 0.99)] ?? 0),
      lost,
      ran_twice: [...runs.values()].filter((count) => count > 1).length,
      worker_errors: summaries.errors,
      worker_deadlines: summaries.deadlines,
    };
  } finally {
    await admin.query(`drop schema if exists "${schema}" cascade`).catch(() => {});
    await Promise.all([setup.close(), enqueuerDb.close(), ...workerDbs.map((db) => db.close()), admin.end()]);
  }
}
