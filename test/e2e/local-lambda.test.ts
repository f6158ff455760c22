// The local Lambda emulator (scripts/local-lambda) over the packaged app and a fixture service,
// with the real AWS SDK and a real Postgres: nudges start the packaged worker, the worker's
// reserved concurrency holds, a function that runs past its timeout is killed without taking the
// server down, and `npm run dev -- --lambda` serves the app.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as pause } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { InvokeCommand, type InvokeCommandOutput, LambdaClient } from '@aws-sdk/client-lambda';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FAN_OUT_EVENT, NUDGE_EVENT } from '../../adapters/lambda-invoke.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { startHttpApi } from '../../scripts/local-lambda/http-api.js';
import { packageService } from '../../scripts/local-lambda/package.js';
import { type LocalLambda, startLocalLambda } from '../../scripts/local-lambda/server.js';
import { freePort } from '../../scripts/local-postgres.js';
import { stall } from '../fixtures/local-lambda/functions/stall-kind.js';
import { setupTestSchema, type TestContext } from '../helpers/db.js';
import { useLocalAwsCredentials } from '../helpers/lambda-endpoint.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
// Inside the repository: the unzipped bundles import @aws-sdk/* from its node_modules.
const work = join(root, '.local-lambda', `test-${randomBytes(4).toString('hex')}`);
const packages = mkdtempSync(join(tmpdir(), 'skiplock-local-lambda-'));
const TOKEN = 'local-lambda-token-0123456789abcdef';
const WORKER = 'skiplock-test-worker';
const ENQUEUE = 'skiplock-test-enqueue';
const STALL = 'skiplock-fixture-test-stall';
const MISBEHAVE = 'skiplock-fixture-test-misbehave';

let t: TestContext;
let app: LocalLambda;
let fixture: LocalLambda;
let receiver: Awaited<ReturnType<typeof startHoldingReceiver>>;
const logs: string[] = [];

useLocalAwsCredentials();

beforeAll(async () => {
  // The app is packaged from a copy of its service folder: serverless-esbuild works in
  // <service>/.esbuild, which another test packaging the repository at the same time would share.
  const service = join(work, 'service');
  mkdirSync(service, { recursive: true });
  cpSync(join(root, 'serverless.yml'), join(service, 'serverless.yml'));
  cpSync(join(root, 'functions'), join(service, 'functions'), { recursive: true });
  await Promise.all([
    packageService({ serviceDir: service, outDir: join(packages, 'app'), stage: 'test' }),
    packageService({
      serviceDir: join(root, 'test/fixtures/local-lambda'),
      outDir: join(packages, 'fixture'),
      stage: 'test',
    }),
  ]);
  t = await setupTestSchema('unit-local-lambda');
  receiver = await startHoldingReceiver();
  const environment = {
    DATABASE_URL: inject('databaseUrl'),
    SKIPLOCK_SCHEMA: t.schema,
    SKIPLOCK_ENQUEUE_TOKEN: TOKEN,
    SKIPLOCK_LOG_LEVEL: 'error',
    SKIPLOCK_METRICS: 'none',
    WEBHOOK_SIGNING_SECRET: 'local-lambda-signing-secret',
    // One job per worker invocation, so each holds a slot while its webhook waits.
    SKIPLOCK_CONCURRENCY: '1',
    SKIPLOCK_BATCH_SIZE: '1',
  };
  const onLog = (name: string, line: string) => logs.push(`[${name}] ${line}`);
  app = await startLocalLambda({ packageDir: join(packages, 'app'), codeDir: join(work, 'app'), environment, onLog });
  fixture = await startLocalLambda({
    packageDir: join(packages, 'fixture'),
    codeDir: join(work, 'fixture'),
    environment,
    onLog,
  });
}, 120_000);

afterAll(async () => {
  await app?.close();
  await fixture?.close();
  await receiver?.close();
  await t?.close();
  rmSync(work, { recursive: true, force: true });
  rmSync(packages, { recursive: true, force: true });
});

const client = (lambda: LocalLambda) => new LambdaClient({ endpoint: lambda.url, maxAttempts: 1 });
const payloadOf = (output: InvokeCommandOutput) => JSON.parse(Buffer.from(output.Payload ?? []).toString('utf8'));
const invoke = (lambda: LocalLambda, name: string, event: unknown) =>
  client(lambda).send(new InvokeCommand({ FunctionName: name, Payload: JSON.stringify(event) }));
const jobStates = async () =>
  (await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state order by state`)).rows;

describe('the local Lambda emulator over the packaged app', () => {
  it('a job enqueued over the HTTP route is completed by the packaged worker its nudge started, with no tick', async () => {
    const api = await startHttpApi(app, app.template.routes);
    try {
      const refused = await fetch(`${api.url}/jobs`, { method: 'POST', body: '{}' });
      expect(refused.status).toBe(401);
      const response = await fetch(`${api.url}/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          kind: 'send-email',
          payload: { to: 'ada@example.com', subject: 'Hi', template: 'welcome', idempotencyKey: 'nudge-1' },
        }),
      });
      expect(response.status).toBe(200);
      const { results } = (await response.json()) as { results: { id: string; outcome: string }[] };
      expect(results).toMatchObject([{ outcome: 'inserted' }]);
      const worker = await app.waitFor((r) => r.functionName === WORKER);
      expect(worker).toMatchObject({ invocationType: 'Event', event: NUDGE_EVENT, coldStart: true });
      expect(worker.outcome).toMatchObject({ ok: true, result: { claimed: 1, completed: 1 } });
      const job = await t.admin.query(`select state from "${t.schema}".jobs where id = $1`, [results[0]?.id]);
      expect(job.rows).toEqual([{ state: 'completed' }]);
      // The enqueue function got API Gateway's payload 2.0 event for the template's route.
      const enqueues = app.invocations.filter((r) => r.functionName === ENQUEUE);
      expect(enqueues.map((r) => (r.event as { routeKey: string }).routeKey)).toEqual(['POST /jobs', 'POST /jobs']);
      // Nothing else started the worker: no schedule runs in the emulator.
      expect(app.invocations.filter((r) => r.functionName === WORKER)).toHaveLength(1);
    } finally {
      await api.close();
    }
  });

  it("never runs more of the worker's environments at once than its reserved concurrency: Event invokes past it wait, a synchronous one gets 429, every job completes", async () => {
    const limit = app.template.functions.find((f) => f.name === WORKER)?.reservedConcurrency;
    expect(limit).toBe(10);
    const hooks = Array.from({ length: 10 }, (_, n) => ({
      kind: 'deliver-webhook',
      payload: { url: `${receiver.url}/hook`, event: 'test', deliveryId: `d-${n}`, data: { n } },
    }));
    const enqueued = await invoke(app, ENQUEUE, { jobs: hooks });
    expect(payloadOf(enqueued)).toMatchObject({ status: 200 });
    // The nudge started one worker; 30 more asynchronous invokes arrive at once.
    const sdk = new LambdaClient({ endpoint: app.url });
    const answers = await Promise.all(
      Array.from({ length: 30 }, () =>
        sdk.send(
          new InvokeCommand({ FunctionName: WORKER, InvocationType: 'Event', Payload: JSON.stringify(FAN_OUT_EVENT) }),
        ),
      ),
    );
    expect(answers.map((a) => a.StatusCode)).toEqual(Array(30).fill(202));
    // Ten invocations, each holding one webhook that the receiver does not answer yet.
    await receiver.holding(10);
    expect(app.stats(WORKER)).toMatchObject({ running: 10 });
    // The 30 Event invokes past the 10 running wait. The enqueue's own nudge came within the first
    // test's coalescing window, so it is sent when that window ends (1 s): whether it waits here yet
    // depends on how fast the machine got to this line (it flaked on an idle one); the count of
    // invocations below checks that it came.
    expect(app.stats(WORKER).waiting).toBeGreaterThanOrEqual(20);
    await expect(invoke(app, WORKER, {})).rejects.toMatchObject({ name: 'TooManyRequestsException' });
    receiver.release();
    await app.idle();
    const stats = app.stats(WORKER);
    expect(stats.peakRunning).toBe(10);
    expect(stats.throttled).toBe(1);
    expect(stats.invocations).toBeGreaterThanOrEqual(32); // the nudge of the first test, this nudge, 30
    expect(receiver.peak()).toBe(10);
    expect(receiver.delivered().sort()).toEqual(hooks.map((h) => h.payload.deliveryId).sort());
    expect(await jobStates()).toEqual([{ state: 'completed', n: 11 }]);
  });

  it('a function that runs past its timeout is killed (Sandbox.Timedout); the server stays up, the next invocation runs, and the job is rescued when its lease expires', async () => {
    // Warm the function first: a cold start (a new process, the bundle, a connection) on a loaded
    // machine can take most of the 4 s, and a worker claims no job it has no time left to run
    // (this invocation may stop for its deadline rather than an empty queue: nothing is queued).
    expect(payloadOf(await invoke(fixture, STALL, {}))).toMatchObject({ claimed: 0 });
    const job = await createEnqueuer({ schema: t.schema }).enqueue(t.db, stall, { blockMs: 30_000 });
    const killed = await invoke(fixture, STALL, {});
    expect(fixture.invocations.at(-1)).toMatchObject({ coldStart: false });
    expect(killed.FunctionError).toBe('Unhandled');
    expect(payloadOf(killed)).toMatchObject({
      errorType: 'Sandbox.Timedout',
      errorMessage: expect.stringMatching(/Task timed out after 4\.00 seconds$/),
    });
    const killedRecord = fixture.invocations.at(-1);
    expect(() => process.kill(killedRecord?.pid ?? 0, 0)).toThrow(); // its process is gone
    expect(fixture.stats(STALL)).toMatchObject({ timedOut: 1, running: 0 });
    const row = async () =>
      (
        await t.admin.query(
          `select state, attempt, lease_expires_at > clock_timestamp() as leased from "${t.schema}".jobs where id = $1`,
          [job.id],
        )
      ).rows[0];
    // The killed invocation could write nothing: the job is still its, until the lease ends.
    expect(await row()).toEqual({ state: 'running', attempt: 1, leased: true });

    const next = await invoke(fixture, STALL, {});
    expect(next.FunctionError).toBeUndefined();
    // It claims nothing while the lease holds: it finds the queue empty, or (a cold start on a loaded
    // machine taking most of the 4 s, as above) has no time left for the kind.
    expect(payloadOf(next)).toMatchObject({ claimed: 0 });
    expect(['drained', 'no_kind_fits']).toContain((payloadOf(next) as { stoppedBecause: string }).stoppedBecause);
    expect(fixture.invocations.at(-1)).toMatchObject({ coldStart: true });
    expect(fixture.invocations.at(-1)?.pid).not.toBe(killedRecord?.pid);

    // Invoke again until the lease has expired and an invocation rescues the job (bounded).
    let summary: { claimed?: number; completed?: number } = {};
    for (let attempt = 0; attempt < 40 && !summary.completed; attempt++) {
      await pause(200);
      summary = payloadOf(await invoke(fixture, STALL, {}));
    }
    expect(summary).toMatchObject({ claimed: 1, completed: 1 });
    expect(await row()).toMatchObject({ state: 'completed', attempt: 2 });
  });

  it("a handler's error comes back as Lambda's Unhandled payload; an exit or a crash ends only its environment", async () => {
    const thrown = await invoke(fixture, MISBEHAVE, { do: 'throw' });
    expect(thrown.FunctionError).toBe('Unhandled');
    expect(payloadOf(thrown)).toMatchObject({ errorType: 'TypeError', errorMessage: 'boom' });
    const warm = payloadOf(await invoke(fixture, MISBEHAVE, {}));
    expect(warm).toMatchObject({ ok: true });
    const exited = await invoke(fixture, MISBEHAVE, { do: 'exit' });
    expect(payloadOf(exited)).toMatchObject({
      errorType: 'Runtime.ExitError',
      errorMessage: expect.stringContaining('exit status 3'),
    });
    const crashed = await invoke(fixture, MISBEHAVE, { do: 'crash' });
    expect(payloadOf(crashed)).toMatchObject({ errorType: 'RangeError', errorMessage: 'crashed outside the handler' });
    const after = payloadOf(await invoke(fixture, MISBEHAVE, {}));
    expect(after).toMatchObject({ ok: true });
    expect(after.pid).not.toBe(warm.pid); // a fresh environment after the crash
    await expect(invoke(fixture, 'no-such-function', {})).rejects.toMatchObject({ name: 'ResourceNotFoundException' });
  });
});

describe('npm run dev -- --lambda', () => {
  let child: ChildProcess | undefined;
  const devSchema = `dev_lambda_${randomBytes(4).toString('hex')}`;
  afterAll(async () => {
    if (child && child.exitCode === null) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child?.once('exit', resolve));
    }
    await t.admin.query(`drop schema if exists "${devSchema}" cascade`);
  });

  it('serves the packaged app: prints the ports and the generated token, runs the schedules, and a job posted to the route is run by a nudge', async () => {
    const [port, lambdaPort] = [await freePort(), await freePort()];
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: inject('databaseUrl'),
      SKIPLOCK_SCHEMA: devSchema,
      PORT: String(port),
      LAMBDA_PORT: String(lambdaPort),
      SKIPLOCK_LOG_LEVEL: 'error',
    };
    delete env.SKIPLOCK_ENQUEUE_TOKEN;
    delete env.SKIPLOCK_ADMIN_TOKEN;
    const dev = spawn(
      process.execPath,
      ['--import', 'tsx', 'scripts/dev.ts', '--lambda', '--packaged', join(packages, 'app')],
      {
        cwd: root,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child = dev;
    let output = '';
    const ready = new Promise<void>((resolve, reject) => {
      dev.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        // The three schedules run at once at start; their lines come in any order.
        const scheduled = ['worker', 'reportsWorker', 'maintenance'].every((name) =>
          output.includes(`schedule skiplock-test-${name} → `),
        );
        if (scheduled) resolve();
      });
      dev.once('exit', (code) => reject(new Error(`dev exited with ${code}:\n${output}`)));
    });
    await ready;
    const token = /SKIPLOCK_ENQUEUE_TOKEN=([0-9a-f]{32})/.exec(output)?.[1];
    expect(token).toBeDefined();
    expect(output).toContain(`Invoke API on http://127.0.0.1:${lambdaPort}`);
    expect(output).toContain(`listening on http://127.0.0.1:${port}  (routes: `);
    for (const route of [
      'POST /jobs → skiplock-test-enqueue',
      'POST /control → skiplock-test-control',
      'GET /admin → skiplock-test-console',
      'ANY /admin/{proxy+} → skiplock-test-console',
    ]) {
      expect(output).toContain(route);
    }
    expect(output).toMatch(/schedule skiplock-test-worker → \{"invocationId"/);

    const response = await fetch(`http://127.0.0.1:${port}/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'build-report', payload: { reportId: 'r1', sections: 1 } }),
    });
    expect(response.status).toBe(200);
    // The nudged reportsWorker runs it; the next tick is a minute away. Poll, bounded.
    let state: string | undefined;
    for (let attempt = 0; attempt < 50 && state !== 'completed'; attempt++) {
      await pause(100);
      state = (await t.admin.query(`select state from "${devSchema}".jobs`)).rows[0]?.state;
    }
    expect(state).toBe('completed');

    // The console through the emulated HTTP API (cookies in the event and in the result).
    const adminToken = /SKIPLOCK_ADMIN_TOKEN=([0-9a-f]{32})/.exec(output)?.[1] as string;
    const login = await fetch(`http://127.0.0.1:${port}/admin/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: adminToken, name: 'dev' }).toString(),
    });
    expect(login.status).toBe(303);
    const cookie = (login.headers.getSetCookie()[0] ?? '').split(';')[0] as string;
    const jobs = await fetch(`http://127.0.0.1:${port}/admin/jobs?state=completed`, { headers: { cookie } });
    expect(jobs.status).toBe(200);
    expect(await jobs.text()).toContain('build-report');

    const codeDir = join(root, '.local-lambda', `dev-${dev.pid}`);
    expect(existsSync(codeDir)).toBe(true);
    dev.kill('SIGTERM');
    expect(await new Promise((resolve) => dev.once('exit', resolve))).toBe(0);
    expect(existsSync(codeDir)).toBe(false);
  });
});

/**
 * A webhook receiver that holds every delivery until released: while it holds them, each worker
 * invocation that delivers one stays running.
 */
async function startHoldingReceiver() {
  const held: ServerResponse[] = [];
  const delivered: string[] = [];
  const waiting: { count: number; resolve: () => void }[] = [];
  let released = false;
  let inHand = 0;
  let peak = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    delivered.push(String(req.headers['webhook-id']));
    req.resume();
    if (released) return void res.end('ok');
    inHand++;
    peak = Math.max(peak, inHand);
    held.push(res);
    for (const w of waiting.splice(0)) {
      if (inHand >= w.count) w.resolve();
      else waiting.push(w);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    holding: (count: number) =>
      new Promise<void>((resolve) => (inHand >= count ? resolve() : waiting.push({ count, resolve }))),
    release() {
      released = true;
      for (const res of held.splice(0)) {
        inHand--;
        res.end('ok');
      }
    },
    peak: () => peak,
    delivered: () => delivered,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
