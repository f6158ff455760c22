import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EXIT, runCli } from '../../cli/run.js';
import { connect } from '../../db/connect.js';
import { dumpSchema, parseSchemaDump } from '../../db/schema-dump.js';

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
beforeAll(async () => {
  admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 1 });
  await admin.query(`drop database if exists ${database}`);
  await admin.query(`create database ${database}`);
  rmSync(app, { recursive: true, force: true });
  mkdirSync(app, { recursive: true });
});
afterAll(async () => {
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
      expect((await dumpSchema(db.db, 'skiplock')).objects).toEqual(expected);
    } finally {
      await db.close();
    }
    const check = await cli(['migrate', '--check'], databaseUrl(database));
    expect(check).toMatchObject({ code: EXIT.ok });
    expect(check.out).toMatch(/"skiplock" matches this version's schema/);
  });
});
