// An app as a user starts one from the packed package (test/e2e/init-*.test.ts): a folder outside
// the repository, the tarball installed with the peers the README's install names, `skiplock init`
// run from the installed bin, and `skiplock migrate` as its next steps say. Then a server started
// from the written files, in the platform's own runtime or tooling.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { inject } from 'vitest';
import { installCommands } from '../../cli/init.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { connect, type SkiplockDb } from '../../db/connect.js';
import { jobs } from '../../functions/jobs.js';
import { openAdminPool } from './db.js';
import { npm, packedTarball } from './packed.js';
import { type JobRow, jobRow } from './platforms.js';

const run = promisify(execFile);
export const repo = resolve(import.meta.dirname, '../..');

/** A package's version in this repository's node_modules: the app installs the same, offline. */
export const versionOf = (name: string) =>
  (JSON.parse(readFileSync(join(repo, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;

export interface InitApp {
  dir: string;
  schema: string;
  /** What each `skiplock init <platform>` printed. */
  printed: Record<string, string>;
  /** The database the app's variables name, and a pool to read its rows with. */
  databaseUrl: string;
  admin: ReturnType<typeof openAdminPool>;
  /**
   * Enqueues EXAMPLE_JOBS.completes from the app's own code, as a transaction of the app's would
   * (functions/jobs.ts's send-email, the file init wrote): no route, so nothing nudges it.
   */
  enqueueDirect(): Promise<string>;
  /** One job's row, read outside the app. */
  row(id: string): Promise<JobRow | undefined>;
  /** The variables every platform's app is given here, served at `origin`: the database, the secrets. */
  variables(origin: string): Record<string, string>;
  remove(): Promise<void>;
}

/**
 * Makes the app: installs the packed package beside the peers of the README's `npm install` (at this
 * repository's versions, from the npm cache), runs `skiplock init` for each platform, and migrates
 * `schema` with the installed `skiplock migrate`.
 */
export async function initApp(label: string, platforms: readonly string[]): Promise<InitApp> {
  const root = mkdtempSync(join(tmpdir(), `skiplock-${label}-`));
  const dir = join(root, 'my-app');
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'my-app', private: true, type: 'module' }));
  // The README's install: the tarball, then the peers it names after it (zod, drizzle-orm).
  const peers = /npm install \S+\.tgz (.+)$/.exec(installCommands()[2] ?? '')?.[1]?.split(' ') ?? [];
  if (peers.length === 0) throw new Error(`no peers in the README's install: ${installCommands()[2]}`);
  await npm(['install', await packedTarball(), ...peers.map((name) => `${name}@${versionOf(name)}`)], dir);
  const printed: Record<string, string> = {};
  for (const platform of platforms) {
    printed[platform] = (await run(join(dir, 'node_modules/.bin/skiplock'), ['init', platform], { cwd: dir })).stdout;
  }
  const databaseUrl = inject('databaseUrl');
  const schema = `${label.replace(/\W/g, '_')}_${process.pid}`;
  const admin = openAdminPool(databaseUrl, 2);
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await run(join(dir, 'node_modules/.bin/skiplock'), ['migrate'], {
    cwd: dir,
    env: { ...process.env, DATABASE_URL: databaseUrl, SKIPLOCK_SCHEMA: schema },
  });
  const db: SkiplockDb = connect({ connectionString: databaseUrl });
  return {
    dir,
    schema,
    printed,
    databaseUrl,
    admin,
    enqueueDirect: async () =>
      (await createEnqueuer({ schema }).enqueue(db, jobs[0], EXAMPLE_JOBS.completes.payload)).id,
    row: (id) => jobRow(admin, schema, id),
    variables: (origin) => ({
      DATABASE_URL: databaseUrl,
      SKIPLOCK_SCHEMA: schema,
      SKIPLOCK_LOG_LEVEL: 'error',
      SKIPLOCK_BASE_URL: origin,
      ...SECRETS,
    }),
    remove: async () => {
      await db.close();
      await admin.query(`drop schema if exists "${schema}" cascade`).catch(() => {});
      await admin.end();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export interface Served {
  origin: string;
  /** What the process wrote to stdout and stderr so far. */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts a server process and waits until `origin` answers any request (it listens), or fails with
 * what the process printed when it exits first or does not listen within `timeoutMs`.
 */
export async function startServer(
  command: string,
  args: readonly string[],
  options: { cwd: string; env: Record<string, string>; origin: string; timeoutMs?: number },
): Promise<Served> {
  const child: ChildProcess = spawn(command, args, {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  };
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${command} exited with ${child.exitCode}:\n${output.slice(-2000)}`);
    const listening = await fetch(options.origin).then(
      () => true,
      () => false,
    );
    if (listening) return { origin: options.origin, output: () => output, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${command} did not listen on ${options.origin}:\n${output.slice(-2000)}`);
    }
    // Polling the child's port until it listens: the outcome of its start, not a wait for time.
    await new Promise((done) => setTimeout(done, 100));
  }
}

/** One job of each example kind of functions/jobs.ts, by what happens to it. */
export const EXAMPLE_JOBS = {
  /** send-email without EMAIL_API_URL: logged only, completed. */
  completes: {
    kind: 'send-email',
    payload: { to: 'ada@example.com', subject: 'Hi', template: 'welcome', idempotencyKey: 'k-1' },
  },
  /** deliver-webhook without WEBHOOK_SIGNING_SECRET: discarded, dead at its first attempt. */
  dies: {
    kind: 'deliver-webhook',
    payload: { url: 'https://example.com/hook', event: 'order.paid', deliveryId: 'd-1', data: {} },
  },
  /** build-report, on the reports queue. */
  report: { kind: 'build-report', payload: { reportId: 'r-1', sections: 1 } },
} as const;

/** The secrets the apps are given (16+ characters; the signal secret 32+). */
export const SECRETS = {
  CRON_SECRET: 'cron-secret-for-the-init-tests-0123',
  SKIPLOCK_ENQUEUE_TOKEN: 'enqueue-token-for-the-init-tests-0123',
  SKIPLOCK_ADMIN_TOKEN: 'admin-token-for-the-init-tests-0123',
  SKIPLOCK_SIGNAL_SECRET: 'signal-secret-for-the-init-tests-0123456789',
} as const;

/** skiplock's routes of an app served at `origin`, below `basePath` (Supabase's `/skiplock`). */
export function routesOf(origin: string, basePath = '') {
  const url = (path: string) => `${origin}${basePath}${path}`;
  const post = (path: string, token: string, body: unknown) =>
    fetch(url(path), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
  return {
    /** POST /skiplock/enqueue: the job's id. */
    async enqueue(job: { kind: string; payload: unknown }): Promise<string> {
      const response = await post('/skiplock/enqueue', SECRETS.SKIPLOCK_ENQUEUE_TOKEN, job);
      const body = (await response.json()) as { results?: { id: string }[] };
      if (response.status !== 200 || !body.results?.[0]) {
        throw new Error(`enqueue answered ${response.status}: ${JSON.stringify(body)}`);
      }
      return body.results[0].id;
    },
    replay: (ids: string[]) => post('/skiplock/replay', SECRETS.SKIPLOCK_ADMIN_TOKEN, { ids }),
    /** GET with CRON_SECRET, as a scheduler requests the worker or maintenance route. */
    cron: (path: string, headers: Record<string, string> = {}) =>
      fetch(url(path), { headers: { authorization: `Bearer ${SECRETS.CRON_SECRET}`, ...headers } }),
    /** Logs in to the console with the admin token: the overview's page as the session sees it. */
    async console(): Promise<{ login: number; overview: number; page: string; cookie: string }> {
      const login = await fetch(url('/admin/login'), {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin },
        body: new URLSearchParams({ token: SECRETS.SKIPLOCK_ADMIN_TOKEN, name: 'ada', next: `${basePath}/admin/` }),
      });
      const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
      const overview = await fetch(url('/admin/'), { headers: { cookie } });
      return { login: login.status, overview: overview.status, page: await overview.text(), cookie };
    },
  };
}
