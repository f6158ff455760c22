import { describe, expect, inject, it } from 'vitest';
import { lintMigration } from '../../db/migration-plan.js';
import { DRILL_MIGRATION_STATEMENTS, runUpgradeDrill } from '../../drill/upgrade/run.js';

// The upgrade drill at a small scale (`npm run drill:upgrade` runs it on 1,000,000 rows and a 15 s
// read; docs/reliability.md has its figures). A read holds jobs open when the migration arrives:
// the blocking way makes enqueues wait for the whole read, the online migrator for at most its
// lock timeout. Nothing is lost or run twice either way.
const small = {
  rows: 5_000,
  readMs: 2_000,
  migrateAfterMs: 200,
  settleMs: 300,
  enqueueEveryMs: 10,
  lockTimeoutMs: 300,
};

describe('an upgrade under load', () => {
  it('lints clean: the drill migration is in the online form the linter asks for', () => {
    expect(lintMigration({ tag: '0001_upgrade_drill', statements: DRILL_MIGRATION_STATEMENTS })).toEqual([]);
  });

  it('keeps enqueues flowing while the migration waits behind a long read; loses nothing, runs nothing twice', async () => {
    const online = await runUpgradeDrill({ ...small, databaseUrl: inject('databaseUrl') }, 'online');
    expect(online.lock_retries).toBeGreaterThan(0);
    expect(online.max_enqueue_wait_ms).toBeLessThan(small.readMs / 2);
    expect(online).toMatchObject({ lost: 0, ran_twice: 0, enqueue_errors: 0, worker_errors: 0 });
    expect(online.enqueued).toBeGreaterThan(50);

    // The same change applied the pre-release way: every enqueue queues behind it for the whole read.
    const blocking = await runUpgradeDrill({ ...small, databaseUrl: inject('databaseUrl') }, 'blocking');
    expect(blocking.max_enqueue_wait_ms).toBeGreaterThan(small.readMs - small.migrateAfterMs - 500);
    expect(blocking).toMatchObject({ lost: 0, ran_twice: 0 });
  });
});
