import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EXIT, runCli } from '../../cli/run.js';

const schema = `cli_migrate_${randomBytes(4).toString('hex')}`;
let admin: pg.Pool;

async function cli(argv: string[], env: Record<string, string> = { DATABASE_URL: inject('databaseUrl') }) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, { env, out: (t) => out.push(t), err: (t) => err.push(t) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

beforeAll(() => {
  admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 1 });
});
afterAll(async () => {
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await admin.end();
});

describe('skiplock migrate', () => {
  it('--print writes the SQL for the schema without a database; --objects only what drizzle-kit cannot', async () => {
    const all = await cli(['migrate', '--print', '--schema', 'app_jobs'], {});
    expect(all.code).toBe(EXIT.ok);
    expect(all.out).toMatch(/^-- skiplock migration 0000_baseline, schema "app_jobs"/);
    expect(all.out).toContain('CREATE TABLE "app_jobs"."jobs"');
    expect(all.out).toContain('CREATE OR REPLACE FUNCTION "app_jobs".claim_room');
    expect(all.out).not.toContain('"skiplock"');
    const objects = await cli(['migrate', '--print', '--objects'], {});
    expect(objects.out).not.toContain('CREATE TABLE');
    expect(objects.out).toContain('CREATE TRIGGER jobs_dependents');
    const hostile = await cli(['migrate', '--print', '--schema', 'x"; drop table y; --'], {});
    expect(hostile.code).toBe(EXIT.usage);
    expect(hostile.out).toBe('');
  });

  it('applies with the timeouts given, telling each step; refuses a timeout that is not a number', async () => {
    const bad = await cli(['migrate', '--schema', schema, '--lock-timeout', 'soon']);
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.err).toMatch(/--lock-timeout must be a number/);
    const applied = await cli(['migrate', '--schema', schema, '--lock-timeout', '500', '--statement-timeout', '0']);
    expect(applied).toMatchObject({ code: EXIT.ok });
    expect(applied.out).toMatch(/applied 0000_baseline/);
    expect(applied.err).toMatch(/0000_baseline: step 1 of 1 \(transaction\)/);
  });

  it('--check passes a table whose storage settings were tuned by hand, and names them', async () => {
    await admin.query(`alter table "${schema}".jobs set (fillfactor = 30, autovacuum_vacuum_cost_limit = 2000)`);
    await admin.query(`alter table "${schema}".limits set (autovacuum_vacuum_scale_factor = 0.05)`);
    try {
      const tuned = await cli(['migrate', '--check', '--schema', schema]);
      expect(tuned.code).toBe(EXIT.ok);
      expect(tuned.out).toMatch(/matches this version's schema/);
      expect(tuned.out).toMatch(/storage settings tuned by hand \(not drift\): jobs, limits$/m);
      const json = JSON.parse((await cli(['migrate', '--check', '--json', '--schema', schema])).out);
      expect(json).toMatchObject({
        ok: true,
        drift: { changed: [], unexpected: [], tuned: ['storage jobs', 'storage limits'] },
      });
    } finally {
      await admin.query(`alter table "${schema}".jobs set (fillfactor = 50)`);
      await admin.query(`alter table "${schema}".jobs reset (autovacuum_vacuum_cost_limit)`);
      await admin.query(`alter table "${schema}".limits reset (autovacuum_vacuum_scale_factor)`);
    }
    expect((await cli(['migrate', '--check', '--schema', schema])).out).not.toMatch(/tuned/);
  });

  it('--check exits 0 on a schema that matches, 1 naming what drifted', async () => {
    expect(await cli(['migrate', '--check', '--schema', schema])).toMatchObject({ code: EXIT.ok });
    await admin.query(`drop index "${schema}".jobs_deadline_idx`);
    await admin.query(`create function "${schema}".added_by_hand() returns int language sql as 'select 1'`);
    const drift = await cli(['migrate', '--check', '--schema', schema]);
    expect(drift.code).toBe(EXIT.refused);
    expect(drift.out).toMatch(/missing: index jobs_deadline_idx/);
    expect(drift.out).toMatch(/unexpected: function added_by_hand\(\)/);
    const json = JSON.parse((await cli(['migrate', '--check', '--json', '--schema', schema])).out);
    expect(json).toMatchObject({ ok: false, drift: { missing: ['index jobs_deadline_idx'] } });
  });

  it('--check names the column, index and constraint that differ and how, and that they were made by hand', async () => {
    const other = `${schema}_drift`;
    await admin.query(`drop schema if exists "${other}" cascade`);
    try {
      expect((await cli(['migrate', '--schema', other])).code).toBe(EXIT.ok);
      await admin.query(`alter table "${other}".jobs alter column priority drop default`);
      await admin.query(`alter table "${other}".jobs add column tenant text`);
      await admin.query(`drop index "${other}".jobs_deadline_idx`);
      await admin.query(`create index jobs_deadline_idx on "${other}".jobs (deadline)`);
      await admin.query(`alter table "${other}".jobs drop constraint jobs_priority_check`);
      await admin.query(`alter table "${other}".jobs add constraint jobs_priority_check check (priority < 10)`);
      const drift = await cli(['migrate', '--check', '--schema', other]);
      expect(drift.code).toBe(EXIT.refused);
      const lines = drift.out.split('\n');
      expect(lines).toContain(
        '  changed: column priority of table jobs: is "smallint NOT NULL", expected "smallint DEFAULT 0 NOT NULL"',
      );
      expect(lines).toContain('  unexpected: column tenant of table jobs: is "text"');
      expect(lines).toContain(
        '  changed: index jobs_deadline_idx on table jobs: is "CREATE INDEX jobs_deadline_idx ON skiplock.jobs USING btree (deadline)", ' +
          `expected "CREATE INDEX jobs_deadline_idx ON skiplock.jobs USING btree (deadline) WHERE ((state = 'queued'::text) AND (deadline IS NOT NULL))"`,
      );
      expect(lines).toContain(
        '  changed: constraint jobs_priority_check on table jobs: is "CHECK ((priority < 10))", ' +
          `expected "CHECK (((priority >= '-1000'::integer) AND (priority <= 1000)))"`,
      );
      expect(drift.out).not.toMatch(/changed: table jobs/);
      // Every migration is recorded: migrate would not touch these, so --check does not send the user there.
      expect(drift.out).toMatch(/records every migration of this version: these differences were made by hand/);
      const json = JSON.parse((await cli(['migrate', '--check', '--json', '--schema', other])).out);
      expect(json.drift.changed).toEqual([
        'column jobs.priority',
        'constraint jobs.jobs_priority_check',
        'index jobs_deadline_idx',
      ]);
      expect(json.drift.details).toContainEqual({
        object: 'column jobs.priority',
        table: 'jobs',
        change: 'changed',
        actual: 'smallint NOT NULL',
        expected: 'smallint DEFAULT 0 NOT NULL',
      });
    } finally {
      await admin.query(`drop schema if exists "${other}" cascade`);
    }
  });

  it('reports a statement the database rejects with its SQLSTATE (exit 1), not as an unreachable database', async () => {
    // A role that may connect but not create a schema: the first step fails with permission denied.
    const role = `skiplock_no_create_${randomBytes(4).toString('hex')}`;
    const other = `${schema}_denied`;
    await admin.query(`create role ${role} login`);
    try {
      const url = new URL(inject('databaseUrl'));
      url.username = role;
      url.password = '';
      const denied = await cli(['migrate', '--schema', other], { DATABASE_URL: url.toString() });
      expect(denied.code).toBe(EXIT.refused);
      expect(denied.err).not.toMatch(/cannot reach/);
      expect(denied.err).toMatch(
        /^migration 0000_baseline of skiplock schema ".*" failed at step 1 of 1: permission denied for database \w+ \(SQLSTATE 42501\)/m,
      );
      expect((await admin.query(`select to_regnamespace($1) as ns`, [other])).rows).toEqual([{ ns: null }]);
    } finally {
      await admin.query(`drop role if exists ${role}`);
    }
  });
});
