// The package as a user gets it: packed, installed into an app outside this repository, and used
// from there — its bin, every subpath's types, `skiplock init`, and a Lambda bundle of the init
// output that runs a job against Postgres.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { offlineServerlessEnv } from '../../scripts/local-lambda/package.js';
import { npm, packedTarball } from '../helpers/packed.js';

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'skiplock-package-'));
const app = join(work, 'app');
const schema = `pkg_${process.pid}`;
let tarball: string;

const skiplock = (args: string[], env: Record<string, string | undefined> = {}) =>
  run(join(app, 'node_modules/.bin/skiplock'), args, { cwd: app, env: { ...process.env, ...env }, timeout: 60_000 });

beforeAll(async () => {
  mkdirSync(app);
  // `npm pack` runs prepack (the build) first, as a publish would.
  tarball = await packedTarball();
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'my-app', private: true, type: 'module' }));
  await npm(['install', tarball], app);
  // The app's dev tools, as its own devDependencies would provide them.
  for (const name of ['serverless', 'serverless-esbuild', 'esbuild', '@types/node']) {
    mkdirSync(join(app, 'node_modules', name, '..'), { recursive: true });
    symlinkSync(join(repo, 'node_modules', name), join(app, 'node_modules', name));
  }
}, 240_000);

afterAll(async () => {
  const admin = new pg.Client({ connectionString: inject('databaseUrl') });
  await admin.connect();
  await admin.query(`drop schema if exists ${schema} cascade`);
  await admin.end();
  rmSync(work, { recursive: true, force: true });
});

describe('the packed package, installed into an app outside the repository', () => {
  it('is ESM, and loads from CommonJS too through require(esm) (Node ^20.19 || >=22.12, the engines range)', async () => {
    writeFileSync(
      join(app, 'uses-require.cjs'),
      `const { defineJob, createWorker } = require('skiplock');
const { createLambdaWorker } = require('skiplock/lambda');
const { jobs } = require('skiplock/schema');
console.log([typeof defineJob, typeof createWorker, typeof createLambdaWorker, typeof jobs].join(' '));`,
    );
    const { stdout } = await run(process.execPath, ['--no-warnings', 'uses-require.cjs'], { cwd: app });
    expect(stdout.trim()).toBe('function function function object');
    const manifest = JSON.parse(readFileSync(join(app, 'node_modules/skiplock/package.json'), 'utf8'));
    expect(manifest.type).toBe('module');
    expect(manifest.engines.node).toBe('^20.19.0 || >=22.12.0');
  });

  it('ships dist with declarations and the deploy templates; no source maps, sources or tests', async () => {
    const { stdout } = await run('tar', ['tzf', tarball]);
    const files = stdout.split('\n').filter(Boolean);
    for (const entry of [
      'core/index',
      'db/schema',
      'adapters/lambda',
      'adapters/vercel',
      'adapters/cloudflare',
      'adapters/deno',
      'adapters/netlify',
      'testing/index',
    ]) {
      expect(files).toContain(`package/dist/${entry}.js`);
      expect(files).toContain(`package/dist/${entry}.d.ts`);
    }
    expect(files).toContain('package/dist/cli/main.js');
    expect(files).toContain('package/serverless.yml');
    expect(files).toContain('package/functions/jobs.ts');
    expect(files).toContain('package/api/worker.ts');
    expect(files.filter((f) => f.endsWith('.map'))).toEqual([]);
    // migrate() and `migrate --check` read what they need from dist (migrations embedded, the
    // expected schema as a module): no migration folder, drizzle snapshots or SQL files.
    expect(files).toContain('package/dist/db/migrations.generated.js');
    expect(files).toContain('package/dist/db/schema-sql.generated.js');
    // (A deploy template may be SQL: templates/supabase/skiplock-cron.sql, the pg_cron schedule.)
    expect(
      files.filter((f) => f.startsWith('package/db/') || (f.endsWith('.sql') && !f.startsWith('package/templates/'))),
    ).toEqual([]);
    expect(files).toContain('package/templates/supabase/skiplock-cron.sql');
    expect(files).toContain('package/templates/cloudflare/wrangler.jsonc');
    expect(
      files.filter((f) => /^package\/(core|db|adapters|base|cli|testing|test|bench|chaos)\/.*\.ts$/.test(f)),
    ).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(app, 'node_modules/skiplock/package.json'), 'utf8'));
    expect(manifest.peerDependenciesMeta).toEqual({
      '@opentelemetry/api': { optional: true },
      '@aws-sdk/client-lambda': { optional: true },
      '@aws-sdk/client-secrets-manager': { optional: true },
      '@vercel/functions': { optional: true },
      '@aws-sdk/client-scheduler': { optional: true },
    });
    expect(manifest.dependencies['@aws-sdk/client-secrets-manager']).toBeUndefined();
    // netlify-cli pins @opentelemetry/api ~1.8.0: with ^1.9.0 here, `npm install -D netlify-cli` in an
    // app with skiplock failed (ERESOLVE). test/core's OTel tests pass on 1.8.0 too.
    expect(manifest.peerDependencies['@opentelemetry/api']).toBe('^1.8.0');
  });

  it('`npx skiplock --help` runs from the installed bin and lists init', async () => {
    const { stdout } = await run('npx', ['--no-install', 'skiplock', '--help'], { cwd: app });
    expect(stdout).toMatch(/^skiplock — operate a skiplock queue/);
    expect(stdout).toMatch(/init lambda\|cdk\|vercel\|next/);
    const unknown = await skiplock(['frobnicate']).catch((e: { code: number; stderr: string }) => e);
    expect(unknown).toMatchObject({ code: 2, stderr: expect.stringMatching(/unknown command "frobnicate"/) });
  });

  it('`skiplock init` writes the templates, prints the next steps and refuses to overwrite', async () => {
    const { stdout } = await skiplock(['init', 'lambda']);
    expect(stdout).toMatch(/^wrote serverless\.yml, functions\/jobs\.ts, functions\/worker\.ts/);
    expect(stdout).toMatch(/npx serverless package/);
    // The same files as this repository's deployable app.
    for (const file of ['serverless.yml', 'functions/jobs.ts', 'functions/worker.ts']) {
      expect(readFileSync(join(app, file), 'utf8')).toBe(readFileSync(join(repo, file), 'utf8'));
    }
    const again = await skiplock(['init', 'lambda']).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => err,
    );
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/refusing to overwrite existing files .*serverless\.yml.*nothing was written/);
    const vercel = await skiplock(['init', 'vercel', '--dir', 'web']);
    // No terminal, no --plan: Hobby's crons, and a note on how to switch before the list of files.
    expect(vercel.stdout).toMatch(/^vercel\.json has Hobby's crons/);
    expect(vercel.stdout).toMatch(/^wrote vercel\.json, functions\/jobs\.ts, api\/worker\.ts/m);
    expect(vercel.stdout).toMatch(/npm install @vercel\/functions/);
    expect(readFileSync(join(app, 'web/api/worker.ts'), 'utf8')).toBe(
      readFileSync(join(repo, 'api/worker.ts'), 'utf8'),
    );
  });

  it('an app importing every subpath type-checks, templates included', async () => {
    writeFileSync(
      join(app, 'check.ts'),
      `import { connect, createWorker, defineJob, enqueue, migrate, type EnqueueResult } from 'skiplock';
import { jobs, skiplockSchema } from 'skiplock/schema';
import { createLambdaWorker, loadConfig, type LambdaContext } from 'skiplock/lambda';
import { createVercelWorker, type RouteHandler } from 'skiplock/vercel';
import { type CloudflareWorker, createCloudflareWorker } from 'skiplock/cloudflare';
import { createDenoApp, type PlatformApp } from 'skiplock/deno';
import { createNetlifyRoutes, type NetlifyFunction } from 'skiplock/netlify';
import { ManualClock, runJobs, startLocalNeon } from 'skiplock/testing';
import { verifyWebhook } from 'skiplock/webhooks';
import { z } from 'zod';

const ping = defineJob({ kind: 'ping', payload: z.object({ n: z.number() }), handler: async () => {} });
const db = connect({ connectionString: 'postgres://localhost/app' });
export const result: Promise<EnqueueResult> = enqueue(db, ping, { n: 1 });
export const lambda = createLambdaWorker([ping]);
export const route: RouteHandler = createVercelWorker([ping]);
export const context: LambdaContext = { getRemainingTimeInMillis: () => 1000 };
export const worker: CloudflareWorker = createCloudflareWorker([ping]);
export const denoApp: PlatformApp = createDenoApp([ping], { env: {} });
export const netlify: NetlifyFunction = createNetlifyRoutes([ping], { env: {} });
export { createWorker, jobs, loadConfig, ManualClock, migrate, runJobs, skiplockSchema, startLocalNeon, verifyWebhook };
`,
    );
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
        },
        include: ['check.ts', 'functions', 'web'],
      }),
    );
    const typecheck = await run(join(repo, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.json'], { cwd: app }).then(
      () => '',
      (err: { stdout: string }) => err.stdout,
    );
    expect(typecheck).toBe('');
  });

  it('an app that only enqueues bundles no cloud SDK and no Lambda or Vercel adapter', async () => {
    writeFileSync(join(app, 'enqueue-only.ts'), `import { enqueue } from 'skiplock';\nexport const send = enqueue;\n`);
    const result = await build({
      entryPoints: [join(app, 'enqueue-only.ts')],
      absWorkingDir: app,
      bundle: true,
      platform: 'node',
      format: 'esm',
      write: false,
      metafile: true,
      logLevel: 'silent',
      external: ['pg-native'],
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.some((i) => i.includes('node_modules/skiplock/dist/core/enqueue.js'))).toBe(true);
    expect(inputs.filter((i) => /@aws-sdk|@vercel|skiplock\/dist\/adapters\//.test(i))).toEqual([]);
  });

  it('a webhook receiver importing skiplock/webhooks bundles neither Drizzle nor a database driver', async () => {
    writeFileSync(
      join(app, 'receiver.ts'),
      `import { verifyWebhook } from 'skiplock/webhooks';\nexport const v = verifyWebhook;\n`,
    );
    const result = await build({
      entryPoints: [join(app, 'receiver.ts')],
      absWorkingDir: app,
      bundle: true,
      platform: 'node',
      format: 'esm',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.some((i) => i.includes('node_modules/skiplock/dist/core/webhooks.js'))).toBe(true);
    expect(inputs.filter((i) => /drizzle-orm|node_modules\/pg\/|@neondatabase|zod/.test(i))).toEqual([]);
  });

  it('`serverless package` bundles the init output unchanged, and its worker runs a job on Postgres', async () => {
    const out = join(work, 'sls');
    const env = offlineServerlessEnv();
    await run(process.execPath, [join(app, 'node_modules/serverless/bin/serverless.js'), 'package', '--package', out], {
      cwd: app,
      env,
      timeout: 120_000,
    });
    const unpacked = join(work, 'unpacked');
    for (const name of ['worker', 'enqueue'])
      await run('unzip', ['-q', '-o', join(out, `${name}.zip`), '-d', unpacked]);
    const worker = readFileSync(join(unpacked, 'functions/worker.mjs'), 'utf8');
    expect(worker).toContain('skiplock'); // bundled from the installed package
    expect(worker).not.toContain('neon.tech'); // the pg driver only

    // Migrate with the installed bin, then run the bundled handlers as Lambda would.
    const url = inject('databaseUrl');
    const migrated = await skiplock(['migrate', '--schema', schema], { DATABASE_URL: url });
    expect(migrated.stdout).toMatch(/applied 0000_baseline/);
    // The bundles run in a plain Node process, as in Lambda (not through the test runner's loader).
    const invoke = async (fn: string, event: unknown, extraEnv: Record<string, string | undefined>) => {
      const { stdout } = await run(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `const { handler } = await import(${JSON.stringify(join(unpacked, `functions/${fn}.mjs`))});
           const result = await handler(${JSON.stringify(event)}, { getRemainingTimeInMillis: () => 30000 });
           process.stdout.write('\\nRESULT ' + JSON.stringify(result));`,
        ],
        { cwd: unpacked, env: { PATH: process.env.PATH, SKIPLOCK_LOG_LEVEL: 'error', ...extraEnv }, timeout: 60_000 },
      );
      return JSON.parse(stdout.slice(stdout.lastIndexOf('\nRESULT ') + 8));
    };
    const database = { DATABASE_URL: url, SKIPLOCK_SCHEMA: schema };
    const payload = { to: 'a@example.com', subject: 's', template: 'welcome', idempotencyKey: 'k-1' };
    expect(await invoke('enqueue', { kind: 'send-email', payload }, database)).toMatchObject({
      status: 200,
      results: [{ outcome: 'inserted' }],
    });
    expect(await invoke('worker', { 'detail-type': 'Scheduled Event' }, database)).toMatchObject({
      claimed: 1,
      completed: 1,
      stoppedBecause: 'drained',
    });
    // The AWS SDK is an optional peer: this app does not have it, so a secret id is a clear error.
    expect(await invoke('worker', {}, { DATABASE_SECRET_ID: 'skiplock/database' })).toEqual({
      ok: false,
      error: expect.stringMatching(/DATABASE_SECRET_ID is set, but @aws-sdk\/client-secrets-manager is not installed/),
    });
  });
});
