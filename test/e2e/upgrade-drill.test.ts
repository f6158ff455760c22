import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, inject, it } from 'vitest';
import { lintMigration } from '../../db/migration-plan.js';
import {
  DRILL_MIGRATION_STATEMENTS,
  type DrillPhases,
  type DrillState,
  runUpgradeDrill,
} from '../../drill/upgrade/run.js';

// The upgrade drill at a small scale (`npm run drill:upgrade` runs it on 1,000,000 rows and a 15 s
// read; docs/reliability.md has its figures). A read holds jobs open when the migration arrives:
// the blocking way makes enqueues wait for the whole read, the online migrator for at most its
// lock timeout. Nothing is lost or run twice either way. Each phase ends on an event, not after a
// time, so a loaded machine changes how long the drill takes, never what it finds.

/** Resolves once `condition` holds, looking again every few milliseconds (a poll, not a wait for time). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await delay(5);
}

/** Enqueues keep committing: `n` more than when the phase began. */
const moreEnqueued = (n: number) => (state: DrillState) => {
  const from = state.enqueued();
  return until(() => state.enqueued() >= from + n);
};

const small = { rows: 5_000, enqueueEveryMs: 10, lockTimeoutMs: 300 };

describe('an upgrade under load', () => {
  it('lints clean: the drill migration is in the online form the linter asks for', () => {
    expect(lintMigration({ tag: '0001_upgrade_drill', statements: DRILL_MIGRATION_STATEMENTS })).toEqual([]);
  });

  it('keeps enqueues flowing while the migration waits behind a long read; loses nothing, runs nothing twice', async () => {
    // The read stays open until an enqueue was seen waiting behind the migration and five more
    // committed after it: the migrator gave up its lock wait and let them through. A migrator that
    // held its place in the lock queue would hold every enqueue until the read ends, which it never
    // would here: the test would time out.
    const online: DrillPhases = {
      settle: moreEnqueued(5),
      migrateAfter: async () => {},
      holdRead: (state) => until(() => state.enqueuedSinceBlock() >= 5 && state.lockRetries() > 0),
    };
    const result = await runUpgradeDrill({ ...small, databaseUrl: inject('databaseUrl'), phases: online }, 'online');
    expect(result.lock_retries).toBeGreaterThan(0);
    expect(result.enqueued_behind_migration).toBeGreaterThanOrEqual(5);
    expect(result).toMatchObject({ lost: 0, ran_twice: 0, enqueue_errors: 0, worker_errors: 0 });

    // The same change applied the pre-release way: from the moment an enqueue queues behind it, not
    // one more commits until the read ends.
    const blocking: DrillPhases = {
      settle: moreEnqueued(5),
      migrateAfter: async () => {},
      holdRead: (state) => until(() => state.blockSeen()),
    };
    const before = await runUpgradeDrill(
      { ...small, databaseUrl: inject('databaseUrl'), phases: blocking },
      'blocking',
    );
    expect(before.enqueued_behind_migration).toBe(0);
    expect(before).toMatchObject({ lost: 0, ran_twice: 0, enqueue_errors: 0 });
  });
});
