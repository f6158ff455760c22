import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EXIT, runCli } from '../../cli/run.js';
import { connect } from '../../db/connect.js';
import { MIGRATIONS } from '../../db/migrations.generated.js';
import { dumpSchema, parseSchemaDump } from '../../db/schema-dump.js';
import { openAdminPool } from '../helpers/db.js';

// The README's path for a team that carries skiplock's schema in its own drizzle migrations:
// export the tables, let drizzle-kit generate them, add the objects it cannot express as one
// custom migration, apply with drizzle-kit. It must create exactly what `skiplock migrate` does.

const root = fileURLToPath(new URL('../..', import.meta.url));
const app = join(root, '.test-tmp', `drizzle-path-${process.pid}`);
const database = `skiplock_drizzle_${process.pid}`;
const run = promisify(execFile);

function databaseUrl(name: string): string {
  const url = new URL(inject('databaseUrl'));
  url.pathname = `/${name}`;
  return url.toString();
}

async function cli(argv: string[], url: string) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, { env: { DATABASE_URL: url }, out: (t) => out.push(t), err: (t) => err.push(t) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

const drizzleKit = (...args: string[]) =>
  // From the app's folder, with relative paths, as a user runs it (drizzle-kit 0.31's --custom
  // mishandles an absolute `out`).
  run(join(root, 'node_modules/.bin/drizzle-kit'), [...args, '--config', 'drizzle.config.ts'], {
    cwd: app,
    env: { ...process.env, FORCE_COLOR: '0' },
  });

let admin: pg.Pool;
/** A connection to the app's database, as its owner would open psql. */
let appDb: pg.Pool;
beforeAll(async () => {
  admin = openAdminPool(inject('databaseUrl'), 1);
  await admin.query(`drop database if exists ${database}`);
  await admin.query(`create database ${database}`);
  // With openAdminPool's error listeners: afterAll drops the database (with force) right after
  // appDb.end(), which resolves before its client's socket has closed, and the server's 57P01 then
  // reached a pool with no 'error' listener (an uncaught exception in a CI run, 2026-11-30).
  appDb = openAdminPool(databaseUrl(database), 1);
  rmSync(app, { recursive: true, force: true });
  mkdirSync(app, { recursive: true });
});
afterAll(async () => {
  await appDb.end();
  rmSync(app, { recursive: true, force: true });
  await admin.query(`drop database if exists ${database} with (force)`);
  await admin.end();
});

describe('the Drizzle path', () => {
  it('creates exactly db/schema.sql: drizzle-kit generates the tables, one custom migration the rest', async () => {
    // The app's schema re-exports skiplock/schema (here: its source, which the package builds from).
    writeFileSync(join(app, 'schema.ts'), `export * from '${join(root, 'db/schema.ts')}';\n`);
    writeFileSync(
      join(app, 'drizzle.config.ts'),
      `export default ${JSON.stringify({
        dialect: 'postgresql',
        schema: './schema.ts',
        out: './drizzle',
        dbCredentials: { url: databaseUrl(database) },
      })};\n`,
    );
    await drizzleKit('generate', '--name', 'skiplock_tables');
    // The README says how many tables this step generates: the figure is drizzle-kit's.
    const tables = readdirSync(join(app, 'drizzle')).find((f) => f.endsWith('_skiplock_tables.sql'));
    const created = readFileSync(join(app, 'drizzle', tables as string), 'utf8').match(/^CREATE TABLE /gm) ?? [];
    const quoted = /skiplock's (\d+) tables/.exec(readFileSync(join(root, 'README.md'), 'utf8'))?.[1];
    expect(Number(quoted), "README.md's `drizzle-kit generate  # skiplock's N tables`").toBe(created.length);
    await drizzleKit('generate', '--custom', '--name', 'skiplock_objects');
    const custom = readdirSync(join(app, 'drizzle')).find((f) => f.endsWith('_skiplock_objects.sql'));
    expect(custom).toBeDefined();
    const objects = await cli(['migrate', '--print', '--objects'], databaseUrl(database));
    expect(objects.code).toBe(EXIT.ok);
    expect(objects.out).toMatch(/CREATE OR REPLACE FUNCTION "skiplock"\.claim_room/);
    expect(objects.out).not.toMatch(/CREATE TABLE/);
    writeFileSync(join(app, 'drizzle', custom as string), objects.out);
    await drizzleKit('migrate');

    const db = connect({ connectionString: databaseUrl(database), driver: 'pg' });
    try {
      const expected = parseSchemaDump(readFileSync(join(root, 'db/schema.sql'), 'utf8'));
      expect((await dumpSchema(db.executor, 'skiplock')).objects).toEqual(expected);
    } finally {
      await db.close();
    }
    const check = await cli(['migrate', '--check'], databaseUrl(database));
    expect(check).toMatchObject({ code: EXIT.ok });
    expect(check.out).toMatch(/"skiplock" matches this version's schema/);
  });
});

// A team on the Drizzle path that later runs `skiplock migrate` (to let it apply the next release's
// migration, say) finds its schema recorded in skiplock's journal when it matches, or a refusal
// that says what to do; never a half-made journal. These run on the schema the test above made.
describe('skiplock migrate on a schema the Drizzle path made', () => {
  const journalExists = async () =>
    (await appDb.query(`select to_regclass('skiplock.skiplock_migrations') is not null as exists`)).rows[0].exists;

  it('refuses a schema that differs from this version, naming the column and what to do; writes nothing', async () => {
    await appDb.query('alter table skiplock.jobs alter column priority drop not null');
    try {
      const check = await cli(['migrate', '--check'], databaseUrl(database));
      expect(check.code).toBe(EXIT.refused);
      expect(check.out).toContain(
        'changed: column priority of table jobs: is "smallint DEFAULT 0", expected "smallint DEFAULT 0 NOT NULL"',
      );
      // --check's advice must not lead into a migrate that fails on this schema.
      expect(check.out).toMatch(/no journal of skiplock's migrations/);
      expect(check.out).not.toMatch(/run `npx skiplock migrate` with this version/);

      const refused = await cli(['migrate'], databaseUrl(database));
      expect(refused.code).toBe(EXIT.refused);
      expect(refused.err).not.toMatch(/cannot reach/);
      expect(refused.err).toMatch(/holds skiplock's tables but no journal of skiplock's migrations/);
      expect(refused.err).toMatch(/column priority of table jobs/);
      expect(refused.err).toMatch(/nothing was written/);
      expect(refused.err).toMatch(/drizzle-kit/);
      expect(await journalExists()).toBe(false);
    } finally {
      await appDb.query('alter table skiplock.jobs alter column priority set not null');
    }
  });

  it('records a schema that matches in its journal and applies nothing, also over an empty journal left behind', async () => {
    // What an earlier skiplock left after failing on this schema: its journal, empty.
    await appDb.query(`create table skiplock.skiplock_migrations (id serial primary key, tag text not null unique,
      hash text not null, applied_at timestamptz not null default now(), steps_done integer)`);
    const migrated = await cli(['migrate'], databaseUrl(database));
    expect(migrated).toMatchObject({ code: EXIT.ok, err: '' });
    expect(migrated.out).toMatch(/"skiplock" already has this version's schema: recorded 0000_baseline/);
    expect((await appDb.query('select tag, hash, steps_done from skiplock.skiplock_migrations')).rows).toEqual([
      { tag: '0000_baseline', hash: MIGRATIONS[0]?.hash, steps_done: null },
    ]);
    const db = connect({ connectionString: databaseUrl(database), driver: 'pg' });
    try {
      const expected = parseSchemaDump(readFileSync(join(root, 'db/schema.sql'), 'utf8'));
      expect((await dumpSchema(db.executor, 'skiplock')).objects).toEqual(expected);
    } finally {
      await db.close();
    }
    expect((await cli(['migrate', '--check'], databaseUrl(database))).code).toBe(EXIT.ok);
    const again = await cli(['migrate'], databaseUrl(database));
    expect(again).toMatchObject({ code: EXIT.ok, out: '"skiplock" is up to date' });
  });

  it('is handed over to skiplock migrate as the README says: drizzle-kit stops generating its tables', async () => {
    // Runs after the test above recorded the schema in skiplock's journal.
    writeFileSync(join(app, 'schema.ts'), 'export {};\n');
    await drizzleKit('generate', '--name', 'skiplock_handed_over');
    const handedOver = readdirSync(join(app, 'drizzle')).find((f) => f.endsWith('_skiplock_handed_over.sql'));
    const generated = readFileSync(join(app, 'drizzle', handedOver as string), 'utf8');
    // What drizzle-kit generates when skiplock's tables leave the Drizzle schema: drops, every one.
    const statements = generated.split('--> statement-breakpoint').map((s) => s.trim());
    expect(statements).toContain('DROP TABLE "skiplock"."jobs" CASCADE;');
    expect(statements.every((s) => /^(DROP (TABLE|SCHEMA) "skiplock"|ALTER TABLE "skiplock"\.)/.test(s))).toBe(true);
    writeFileSync(join(app, 'drizzle', handedOver as string), '-- skiplock migrate owns the "skiplock" schema\n');
    await drizzleKit('migrate');
    expect((await cli(['migrate', '--check'], databaseUrl(database))).code).toBe(EXIT.ok);
    // And the Drizzle history no longer carries skiplock: a later generate has nothing of it to add.
    const { stdout } = await drizzleKit('generate', '--name', 'nothing');
    expect(stdout).toMatch(/No schema changes/);
  });
});
