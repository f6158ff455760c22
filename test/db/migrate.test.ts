import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidIdentifierError, NotMigratedError, SkiplockError } from '../../base/errors.js';
import { migrate } from '../../db/migrate.js';
import { MIGRATIONS } from '../../db/migrations.generated.js';
import { getJobs } from '../../db/statements/jobs-read.js';
import { readMigrationFolder } from '../../scripts/migration-folder.js';
import { openAdminPool, openDb, schemaFor } from '../helpers/db.js';

describe('migrate', () => {
  const db = openDb();
  const admin = openAdminPool();
  const schema = schemaFor('migrate');

  beforeAll(async () => {
    await admin.query(`drop schema if exists "${schema}" cascade`);
  });
  afterAll(async () => {
    await admin.query(`drop schema if exists "${schema}" cascade`);
    await db.close();
    await admin.end();
  });

  it('embeds exactly the migrations in db/migrations (run npm run db:generate after editing them)', () => {
    const folder = fileURLToPath(new URL('../../db/migrations', import.meta.url));
    expect(MIGRATIONS).toEqual(readMigrationFolder(folder));
  });

  it('reports a missing schema as not migrated, naming the command a package user has', async () => {
    const error = await getJobs(db.db, schema, ['1']).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotMigratedError);
    expect((error as Error).message).toMatch(/run `npx skiplock migrate` \(or migrate\(\) from code\)/);
    expect((error as Error).message).not.toMatch(/npm run/);
  });

  it('applies every migration once; a second run is a no-op', async () => {
    const first = await migrate(db, { schema });
    expect(first.applied).toEqual(MIGRATIONS.map((m) => m.tag));
    const second = await migrate(db, { schema });
    expect(second.applied).toEqual([]);
    const { rows } = await admin.query(`select tag from "${schema}".skiplock_migrations order by id`);
    expect(rows.map((r) => r.tag)).toEqual(MIGRATIONS.map((m) => m.tag));
  });

  it('lets concurrent migrators finish without errors or double application', async () => {
    const other = schemaFor('migrate-concurrent');
    await admin.query(`drop schema if exists "${other}" cascade`);
    const connections = [openDb(), openDb(), openDb(), openDb()];
    try {
      const results = await Promise.all(connections.map((c) => migrate(c, { schema: other })));
      const applied = results.flatMap((r) => r.applied);
      expect(applied.sort()).toEqual(MIGRATIONS.map((m) => m.tag).sort());
      const { rows } = await admin.query(`select count(*)::int as n from "${other}".skiplock_migrations`);
      expect(rows[0].n).toBe(MIGRATIONS.length);
    } finally {
      await Promise.all(connections.map((c) => c.close()));
      await admin.query(`drop schema if exists "${other}" cascade`);
    }
  });

  describe('the journal tracks migrations by tag', () => {
    const tagged = schemaFor('migrate-tags');
    const journal = `"${tagged}".skiplock_migrations`;
    const journalRows = async () =>
      (await admin.query(`select tag, hash from ${journal} order by id`)).rows as { tag: string; hash: string }[];

    beforeAll(async () => {
      await admin.query(`drop schema if exists "${tagged}" cascade`);
      await migrate(db, { schema: tagged });
    });
    afterAll(async () => {
      await admin.query(`drop schema if exists "${tagged}" cascade`);
    });

    it('refuses to run when an applied migration was edited since, naming it; nothing is rerun', async () => {
      const edited = MIGRATIONS[1]?.tag as string;
      await admin.query(`update ${journal} set hash = 'hash-of-the-original-file' where tag = $1`, [edited]);
      try {
        const before = await journalRows();
        const error = await migrate(db, { schema: tagged }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(SkiplockError);
        expect(error).toMatchObject({ code: 'migration_mismatch' });
        expect((error as Error).message).toContain(edited);
        expect((error as Error).message).toMatch(/edited after it was applied/);
        expect(await journalRows()).toEqual(before);
      } finally {
        await admin.query(`update ${journal} set hash = $2 where tag = $1`, [edited, MIGRATIONS[1]?.hash]);
      }
    });

    it('refuses to run on a schema migrated by a newer version (a tag it does not know)', async () => {
      await admin.query(`insert into ${journal} (tag, hash) values ('9999_from_the_future', 'f00d')`);
      try {
        const error = await migrate(db, { schema: tagged }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(SkiplockError);
        expect(error).toMatchObject({ code: 'migrated_by_newer_version' });
        expect((error as Error).message).toContain('9999_from_the_future');
        expect((error as Error).message).toMatch(/upgrade skiplock/i);
      } finally {
        await admin.query(`delete from ${journal} where tag = '9999_from_the_future'`);
      }
    });

    it('keeps working on a journal table created by earlier versions (hash unique, tag not)', async () => {
      await admin.query(`drop schema "${tagged}" cascade`);
      await admin.query(`create schema "${tagged}"`);
      await admin.query(`create table ${journal} (id serial primary key, tag text not null,
        hash text not null unique, applied_at timestamptz not null default now())`);
      expect((await migrate(db, { schema: tagged })).applied).toEqual(MIGRATIONS.map((m) => m.tag));
      expect((await migrate(db, { schema: tagged })).applied).toEqual([]);
      expect(await journalRows()).toEqual(MIGRATIONS.map((m) => ({ tag: m.tag, hash: m.hash })));
    });
  });

  it('enforces the lifecycle invariants in the database', async () => {
    const insert = (columns: string, values: string) =>
      admin.query(`insert into "${schema}".jobs (kind, ${columns}) values ('k', ${values})`);
    await expect(insert('state', `'paused'`)).rejects.toThrow(/jobs_state_check/);
    await expect(insert('state', `'completed'`)).rejects.toThrow(/jobs_finished_at_check/);
    await expect(insert('state, finished_at, dead_reason', `'dead', now(), null`)).rejects.toThrow(
      /jobs_dead_reason_check/,
    );
    await expect(insert('state', `'running'`)).rejects.toThrow(/jobs_running_lease_check/);
    await expect(insert('priority', '5000')).rejects.toThrow(/jobs_priority_check/);
    await expect(insert('dedupe_key', `'x'`)).rejects.toThrow(/jobs_dedupe_check/);
  });

  it('rejects hostile schema names before touching the database', async () => {
    for (const name of ['a"b', "a'b", 'a%b', 'a$b', 'a;drop table x', 'A', 'x'.repeat(64), 'ünï']) {
      await expect(migrate(db, { schema: name })).rejects.toBeInstanceOf(InvalidIdentifierError);
    }
  });
});
