import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { EXIT } from '../../cli/run.js';
import { connect } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { cliOn } from '../helpers/cli.js';
import { forgetNeonOptions, testNeonEnv } from '../helpers/db.js';

// The CLI through Neon's drivers, configured by its environment alone — SKIPLOCK_DRIVER, and
// SKIPLOCK_NEON_WS_PROXY / SKIPLOCK_NEON_FETCH_ENDPOINT pointing them at the run's stand-ins — as an
// operator on Neon runs it, or a test against a local Postgres. Neon's process-wide settings are put
// back to its defaults before each test: only the environment can point the drivers at the stand-ins.
const schema = `cli_neon_${randomBytes(4).toString('hex')}`;
let admin: pg.Pool;
const JOBS = ['--jobs', 'test/helpers/cli-jobs.ts'];

beforeAll(async () => {
  admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
  const db = connect({ connectionString: inject('databaseUrl') });
  await migrate(db, { schema });
  await db.close();
});
beforeEach(async () => {
  forgetNeonOptions();
  await admin.query(`truncate "${schema}".jobs`);
});
afterAll(async () => {
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await admin.end();
});

describe.each(['neon-ws', 'neon-http'] as const)('the CLI on %s', (driver) => {
  const cli = cliOn(schema, { SKIPLOCK_DRIVER: driver, ...testNeonEnv() });

  it('enqueue, stats and jobs list reach the database through the stand-ins', async () => {
    const enqueued = await cli('enqueue', 'ping', '--payload', '{"n":1}', '--json', ...JOBS);
    expect(enqueued).toMatchObject({ code: EXIT.ok, err: '' });
    const { id } = JSON.parse(enqueued.out) as { id: string };
    const { depth } = JSON.parse((await cli('stats', '--json')).out);
    expect(depth).toEqual([expect.objectContaining({ queue: 'default', kind: 'ping', ready: 1 })]);
    const list = JSON.parse((await cli('jobs', 'list', '--json')).out);
    expect(list).toEqual([expect.objectContaining({ id, kind: 'ping', state: 'queued' })]);
    const { rows } = await admin.query(`select kind, payload from "${schema}".jobs`);
    expect(rows).toEqual([{ kind: 'ping', payload: { n: 1 } }]);
  });

  it("a bad value of the driver's own variable stops it with the variable's name (exit 4), never its value", async () => {
    const variable = driver === 'neon-ws' ? 'SKIPLOCK_NEON_WS_PROXY' : 'SKIPLOCK_NEON_FETCH_ENDPOINT';
    const broken = await cliOn(schema, {
      SKIPLOCK_DRIVER: driver,
      ...testNeonEnv(),
      [variable]: 'not a place s3cret',
    })('stats');
    expect(broken.code).toBe(EXIT.config);
    expect(broken.err).toMatch(new RegExp(`^invalid configuration: ${variable} must `));
    expect(broken.err).not.toContain('s3cret');
  });

  it("a bad value of the other Neon driver's variable stops nothing", async () => {
    const other = driver === 'neon-ws' ? 'SKIPLOCK_NEON_FETCH_ENDPOINT' : 'SKIPLOCK_NEON_WS_PROXY';
    const run = await cliOn(schema, { SKIPLOCK_DRIVER: driver, ...testNeonEnv(), [other]: 'nowhere' })(
      'stats',
      '--json',
    );
    expect(run).toMatchObject({ code: EXIT.ok, err: '' });
    expect(JSON.parse(run.out).depth).toEqual([]);
  });
});

describe('the driver from the environment', () => {
  it('a bad SKIPLOCK_DRIVER is a configuration error naming it (exit 4); a bad --driver a usage error (exit 2)', async () => {
    const fromEnv = await cliOn(schema, { SKIPLOCK_DRIVER: 'mysql' })('stats');
    expect(fromEnv).toMatchObject({
      code: EXIT.config,
      err: 'invalid configuration: SKIPLOCK_DRIVER must be one of pg, neon-ws, neon-http',
    });
    const fromFlag = await cliOn(schema)('stats', '--driver', 'mysql');
    expect(fromFlag.code).toBe(EXIT.usage);
    expect(fromFlag.err).toMatch(/^--driver must be one of pg, neon-ws, neon-http/);
  });

  it('--driver wins over SKIPLOCK_DRIVER, and pg ignores the Neon variables, bad or not', async () => {
    const run = await cliOn(schema, {
      SKIPLOCK_DRIVER: 'neon-http',
      SKIPLOCK_NEON_WS_PROXY: 'nowhere',
      SKIPLOCK_NEON_FETCH_ENDPOINT: 'nowhere',
    })('stats', '--json', '--driver', 'pg');
    expect(run).toMatchObject({ code: EXIT.ok, err: '' });
  });
});
