// `--jobs ./functions/jobs.ts` as an operator types it (docs/operations.md), run by the CLI as a user
// gets it — built, in node_modules/skiplock, started by Node itself (not through vitest or tsx) —
// from apps outside this repository: one with tsx installed, one without.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type BuildOptions, build } from 'esbuild';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';

const repo = resolve(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'skiplock-cli-jobs-'));
const pkg = join(work, 'node_modules/skiplock');
const withTsx = join(work, 'with-tsx');
const withoutTsx = join(work, 'without-tsx');
const schema = `cli_jobs_${process.pid}`;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `skiplock …` in `app`, on this Node (the test's own: Node 20 here, the engines' floor). */
const skiplock = (app: string, ...args: string[]) =>
  new Promise<Run>((done) => {
    execFile(
      process.execPath,
      [join(pkg, 'dist/cli/main.js'), ...args],
      {
        cwd: app,
        timeout: 60_000,
        env: { PATH: process.env.PATH, DATABASE_URL: inject('databaseUrl'), SKIPLOCK_SCHEMA: schema },
      },
      (err, stdout, stderr) =>
        done({ code: err ? Number((err as { code?: number }).code ?? -1) : 0, stdout: stdout.trim(), stderr }),
    );
  });

// The app's job kinds, in TypeScript: an interface, annotations, and a sibling module imported by its
// .js name (what TypeScript's NodeNext resolution asks for).
const JOBS_TS = `import { defineJob } from 'skiplock';
import { chargePayload } from './payloads.js';

interface Charge {
  orderId: number;
  apiKey: string;
}
const sensitive: Array<keyof Charge> = ['apiKey'];
export const jobs = [defineJob({ kind: 'charge', payload: chargePayload, sensitive })];
`;
const PAYLOADS_TS = `import { z } from 'zod';
export const chargePayload = z.object({ orderId: z.number(), apiKey: z.string() });
export type ChargePayload = z.infer<typeof chargePayload>;
`;

function writeApp(dir: string, tsx: boolean): void {
  mkdirSync(join(dir, 'functions'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'my-app', private: true, type: 'module' }));
  writeFileSync(join(dir, 'functions/jobs.ts'), JOBS_TS);
  writeFileSync(join(dir, 'functions/payloads.ts'), PAYLOADS_TS);
  // Plain JavaScript whose import fails: the cause carries a connection string (a made-up one, put
  // together here so that no credential-looking literal sits in the source).
  const url = ['postgres://app', 'hunter2@db.example.com/app'].join(':');
  writeFileSync(
    join(dir, 'functions/broken.mjs'),
    `throw new Error('EMAIL_API_URL is not set; DATABASE_URL is ${url}');\n`,
  );
  if (tsx) {
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(join(repo, 'node_modules/tsx'), join(dir, 'node_modules/tsx'));
  }
}

beforeAll(async () => {
  // The package as npm installs it (its dist, zod beside it as the peer), shared by both apps.
  const common = {
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: ['zod', 'pg-native'],
    banner: { js: "import { createRequire } from 'module'; const require = createRequire(import.meta.url);" },
    logLevel: 'silent',
  } satisfies BuildOptions;
  await build({ ...common, entryPoints: [join(repo, 'cli/main.ts')], outfile: join(pkg, 'dist/cli/main.js') });
  await build({ ...common, entryPoints: [join(repo, 'core/index.ts')], outfile: join(pkg, 'dist/index.js') });
  writeFileSync(
    join(pkg, 'package.json'),
    JSON.stringify({ name: 'skiplock', type: 'module', exports: { '.': './dist/index.js' } }),
  );
  symlinkSync(join(repo, 'node_modules/zod'), join(work, 'node_modules/zod'));
  writeApp(withTsx, true);
  writeApp(withoutTsx, false);
  expect(await skiplock(withoutTsx, 'migrate')).toMatchObject({ code: 0 });
}, 120_000);

afterAll(async () => {
  const admin = new pg.Client({ connectionString: inject('databaseUrl') });
  await admin.connect();
  await admin.query(`drop schema if exists ${schema} cascade`);
  await admin.end();
  rmSync(work, { recursive: true, force: true });
});

const card = JSON.stringify({ orderId: 7, apiKey: 'sk_live_SECRET' });

describe(`skiplock --jobs with a TypeScript module, on Node ${process.versions.node}`, () => {
  it('loads it through the tsx the app has installed: enqueue validates, jobs show masks', async () => {
    const enqueued = await skiplock(withTsx, 'enqueue', 'charge', '--payload', card, '--jobs', './functions/jobs.ts');
    expect(enqueued).toMatchObject({ code: 0, stderr: '' });
    expect(enqueued.stdout).toMatch(/^inserted job \d+$/);
    const id = enqueued.stdout.split(' ').at(-1) as string;
    const shown = await skiplock(withTsx, 'jobs', 'show', id, '--jobs', './functions/jobs.ts');
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('"apiKey":"***"');
    expect(shown.stdout).not.toContain('sk_live_SECRET');
    const bad = await skiplock(
      withTsx,
      'enqueue',
      'charge',
      '--payload',
      '{"orderId":"x"}',
      '--jobs',
      './functions/jobs.ts',
    );
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/invalid payload for charge/);
  });

  it('without a TypeScript loader, says why (the Node version, the cause, no tsx) and what to do; exit 4', async () => {
    // The premise: nothing resolves tsx from this app (no node_modules above it holds one).
    expect(() => createRequire(join(withoutTsx, 'functions/jobs.ts')).resolve('tsx/esm/api')).toThrow();
    const run = await skiplock(withoutTsx, 'enqueue', 'charge', '--payload', card, '--jobs', './functions/jobs.ts');
    expect(run.code).toBe(4);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    const [message] = lines as [string];
    expect(message).toMatch(/^cannot load the jobs module \.\/functions\/jobs\.ts: /);
    expect(message).toContain(`Node ${process.version} cannot import TypeScript by itself`);
    expect(message).toContain('Unknown file extension ".ts"');
    expect(message).toContain('no TypeScript loader (tsx) is installed');
    expect(message).toContain('npm install --save-dev tsx');
    expect(message).toContain('compiled JavaScript');
    expect(message).toMatch(/Node 22\.18/);
    expect(message).not.toMatch(/\bat .*:\d+:\d+/);
  });

  it('a module whose import fails: the cause, without its secrets or stack; exit 4', async () => {
    const run = await skiplock(withTsx, 'stats', '--jobs', './functions/broken.mjs');
    expect(run.code).toBe(4);
    expect(run.stderr.trim()).toBe(
      'cannot load the jobs module ./functions/broken.mjs: EMAIL_API_URL is not set; DATABASE_URL is postgres://***',
    );
  });

  it('a module that is not there: says so, with the path it looked at; exit 4', async () => {
    const run = await skiplock(withTsx, 'stats', '--jobs', './functions/nope.ts');
    expect(run.code).toBe(4);
    expect(run.stderr.trim()).toBe(
      `cannot load the jobs module ./functions/nope.ts: there is no file ${join(withTsx, 'functions/nope.ts')}`,
    );
  });
});
