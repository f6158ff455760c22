import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { BUNDLE_SIZES_PAGE, BUNDLE_TOLERANCE_BYTES, parseBundleSizes } from '../../scripts/bundle-figures.js';
import { offlineServerlessEnv } from '../../scripts/local-lambda/package.js';
import { read } from '../helpers/markdown.js';

const run = promisify(execFile);
const out = mkdtempSync(join(tmpdir(), 'skiplock-sls-'));
const unpacked = mkdtempSync(join(tmpdir(), 'skiplock-bundles-'));
type Resource = { Type: string; Properties: Record<string, unknown> };
let resources: Record<string, Resource>;

beforeAll(async () => {
  const env = offlineServerlessEnv();
  await run('npx', ['serverless', 'package', '--stage', 'ci', '--package', out], { env, timeout: 120_000 });
  resources = JSON.parse(readFileSync(join(out, 'cloudformation-template-update-stack.json'), 'utf8')).Resources;
}, 150_000);
afterAll(() => {
  rmSync(out, { recursive: true, force: true });
  rmSync(unpacked, { recursive: true, force: true });
});

const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);

describe('serverless package (offline, no AWS credentials)', () => {
  it('defines the eight functions on Node 22 with timeouts that leave room for the leases', () => {
    const functions = Object.fromEntries(
      ofType('AWS::Lambda::Function').map(([name, r]) => [
        name,
        r.Properties as { Runtime: string; Timeout: number; Handler: string },
      ]),
    );
    expect(Object.keys(functions).sort()).toEqual([
      'ConsoleLambdaFunction',
      'ControlLambdaFunction',
      'EnqueueLambdaFunction',
      'MaintenanceLambdaFunction',
      'ReplayLambdaFunction',
      'ReportsWorkerLambdaFunction',
      'SignalLambdaFunction',
      'WorkerLambdaFunction',
    ]);
    for (const f of Object.values(functions)) expect(f.Runtime).toBe('nodejs22.x');
    // Kinds: e-mails and webhooks time out at 10 s, reports at 30 s; plus 2 s safety margin.
    expect(functions.WorkerLambdaFunction?.Timeout).toBe(60);
    expect(functions.ReportsWorkerLambdaFunction?.Timeout).toBe(300);
  });

  it('idle (the default): the workers and maintenance rules are a safety net every 6 hours, as SKIPLOCK_IDLE_RECHECK_MINUTES says', () => {
    const rules = ofType('AWS::Events::Rule').map(
      ([, r]) => r.Properties as { ScheduleExpression: string; Targets: { Arn: { 'Fn::GetAtt': string[] } }[] },
    );
    const byTarget = Object.fromEntries(rules.map((r) => [r.Targets[0]?.Arn['Fn::GetAtt'][0], r.ScheduleExpression]));
    expect(byTarget).toEqual({
      WorkerLambdaFunction: 'rate(6 hours)',
      ReportsWorkerLambdaFunction: 'rate(6 hours)',
      MaintenanceLambdaFunction: 'rate(6 hours)',
    });
    const variables = (name: string) =>
      (resources[name]!.Properties as { Environment: { Variables: Record<string, unknown> } }).Environment.Variables;
    for (const name of ['WorkerLambdaFunction', 'ReportsWorkerLambdaFunction', 'MaintenanceLambdaFunction']) {
      expect(variables(name)).toMatchObject({
        SKIPLOCK_IDLE: 'true',
        SKIPLOCK_IDLE_RECHECK_MINUTES: String(6 * 60),
        SKIPLOCK_WAKE_ROLE_ARN: { 'Fn::GetAtt': ['WakeRole', 'Arn'] },
        SKIPLOCK_MAINTENANCE_FUNCTION: 'skiplock-ci-maintenance',
      });
    }
    // The replayed jobs' workers are nudged and woken as an enqueue's are.
    expect(variables('ReplayLambdaFunction').SKIPLOCK_NUDGE_FUNCTIONS).toBe(
      'emails,webhooks=skiplock-ci-worker;reports=skiplock-ci-reportsWorker',
    );
  });

  it('the wake role: EventBridge Scheduler of this account may invoke the workers and maintenance, nothing else', () => {
    const wake = resources.WakeRole?.Properties as {
      AssumeRolePolicyDocument: { Statement: { Principal: unknown; Action: string }[] };
      Policies: { PolicyDocument: { Statement: { Action: string; Resource: unknown }[] } }[];
    };
    expect(wake.AssumeRolePolicyDocument.Statement).toMatchObject([
      { Principal: { Service: 'scheduler.amazonaws.com' }, Action: 'sts:AssumeRole' },
    ]);
    expect(wake.Policies.flatMap((p) => p.PolicyDocument.Statement)).toEqual([
      {
        Effect: 'Allow',
        Action: 'lambda:InvokeFunction',
        Resource: ['worker', 'reportsWorker', 'maintenance'].map((name) => ({
          'Fn::Sub': `arn:\${AWS::Partition}:lambda:\${AWS::Region}:\${AWS::AccountId}:function:skiplock-ci-${name}`,
        })),
      },
    ]);
  });

  it('exposes only enqueue, control, signal callbacks and the console over HTTP; replay has no HTTP event', () => {
    const routes = ofType('AWS::ApiGatewayV2::Route').map(([, r]) => r.Properties.RouteKey);
    expect(routes.sort()).toEqual(['ANY /admin/{proxy+}', 'GET /admin', 'POST /control', 'POST /jobs', 'POST /signal']);
    const permissions = ofType('AWS::Lambda::Permission').map(
      ([, r]) => r.Properties as { FunctionName: { 'Fn::GetAtt': string[] }; Principal: string },
    );
    const httpTargets = permissions
      .filter((p) => p.Principal === 'apigateway.amazonaws.com')
      .map((p) => p.FunctionName['Fn::GetAtt'][0]);
    expect([...new Set(httpTargets)].sort()).toEqual([
      'ConsoleLambdaFunction',
      'ControlLambdaFunction',
      'EnqueueLambdaFunction',
      'SignalLambdaFunction',
    ]);
    expect(permissions.some((p) => p.FunctionName['Fn::GetAtt'][0] === 'ReplayLambdaFunction')).toBe(false);
  });

  it('grants secretsmanager:GetSecretValue on the database secret, lambda:InvokeFunction on the workers, skiplock-* schedules with the wake role, nothing broader', () => {
    const role = resources.IamRoleLambdaExecution!;
    const statements = (
      role.Properties.Policies as { PolicyDocument: { Statement: { Action: string[]; Resource: unknown }[] } }[]
    ).flatMap((p) => p.PolicyDocument.Statement);
    const secrets = statements.filter((s) => s.Action.some((a) => a.startsWith('secretsmanager:')));
    expect(secrets).toEqual([
      {
        Effect: 'Allow',
        Action: ['secretsmanager:GetSecretValue'],
        Resource: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:skiplock/database',
      },
    ]);
    // Fan-out: invoking the two worker functions, and no other function.
    const invokes = statements.filter((s) => s.Action.some((a) => a.startsWith('lambda:')));
    expect(invokes).toEqual([
      {
        Effect: 'Allow',
        Action: ['lambda:InvokeFunction'],
        Resource: ['worker', 'reportsWorker'].map((name) => ({
          'Fn::Sub': `arn:\${AWS::Partition}:lambda:\${AWS::Region}:\${AWS::AccountId}:function:skiplock-ci-${name}`,
        })),
      },
    ]);
    // Idle: one-off wake-ups named skiplock-…, run with the wake role and no other.
    const wakes = statements.filter((s) => s.Action.some((a) => a.startsWith('scheduler:') || a.startsWith('iam:')));
    expect(wakes).toEqual([
      {
        Effect: 'Allow',
        Action: ['scheduler:CreateSchedule'],
        Resource: [
          {
            'Fn::Sub': `arn:\${AWS::Partition}:scheduler:\${AWS::Region}:\${AWS::AccountId}:schedule/default/skiplock-*`,
          },
        ],
      },
      { Effect: 'Allow', Action: ['iam:PassRole'], Resource: [{ 'Fn::GetAtt': ['WakeRole', 'Arn'] }] },
    ]);
    // The rest is the framework's own log-writing statement.
    const others = statements
      .filter((s) => !secrets.includes(s) && !invokes.includes(s) && !wakes.includes(s))
      .flatMap((s) => s.Action);
    expect(others.every((a) => a.startsWith('logs:'))).toBe(true);
  });

  it("each worker's reserved concurrency equals its SKIPLOCK_MAX_INVOCATIONS; the other functions have no cap", () => {
    const functions = Object.fromEntries(
      ofType('AWS::Lambda::Function').map(([name, r]) => [
        name,
        r.Properties as { ReservedConcurrentExecutions?: number; Environment: { Variables: Record<string, string> } },
      ]),
    );
    for (const [name, cap] of [
      ['WorkerLambdaFunction', 10],
      ['ReportsWorkerLambdaFunction', 4],
    ] as const) {
      expect(functions[name]?.ReservedConcurrentExecutions).toBe(cap);
      expect(functions[name]?.Environment.Variables.SKIPLOCK_MAX_INVOCATIONS).toBe(String(cap));
    }
    for (const name of ['EnqueueLambdaFunction', 'ReplayLambdaFunction', 'MaintenanceLambdaFunction']) {
      expect(functions[name]?.ReservedConcurrentExecutions).toBeUndefined();
    }
    // The enqueue and signal functions nudge the worker of each queue: the functions the IAM statement allows.
    for (const name of ['EnqueueLambdaFunction', 'SignalLambdaFunction']) {
      expect(functions[name]?.Environment.Variables.SKIPLOCK_NUDGE_FUNCTIONS).toBe(
        'emails,webhooks=skiplock-ci-worker;reports=skiplock-ci-reportsWorker',
      );
    }
  });

  it('ships example alarms on the EMF metrics: jobs dying, oldest job age, silent worker', () => {
    const alarms = Object.fromEntries(
      ofType('AWS::CloudWatch::Alarm').map(([name, r]) => [
        name,
        r.Properties as { Namespace: string; MetricName: string; Dimensions: { Value: string }[] },
      ]),
    );
    expect(Object.keys(alarms).sort()).toEqual(['JobsDyingAlarm', 'OldestJobAlarm', 'WorkerSilentAlarm']);
    expect(alarms.JobsDyingAlarm).toMatchObject({
      Namespace: 'skiplock',
      MetricName: 'JobsDead',
      Dimensions: [{ Value: 'skiplock-ci-worker' }],
    });
    expect(alarms.OldestJobAlarm).toMatchObject({
      MetricName: 'OldestReadyAge',
      Dimensions: [{ Value: 'skiplock-ci-maintenance' }],
    });
    expect(alarms.WorkerSilentAlarm).toMatchObject({
      MetricName: 'SuccessfulInvocations',
      TreatMissingData: 'breaching',
    });
  });

  it('every bundle loads; the bundled worker, enqueue and control run for real: ESM banner, SDK external, pg driver only', async () => {
    const names = ['worker', 'reportsWorker', 'enqueue', 'replay', 'control', 'signal', 'console', 'maintenance'];
    for (const name of names) await run('unzip', ['-q', '-o', join(out, `${name}.zip`), '-d', unpacked]);
    const worker = readFileSync(join(unpacked, 'functions/worker.mjs'), 'utf8');
    expect(worker.startsWith("import { createRequire } from 'module'")).toBe(true);
    expect(worker).not.toContain('neon.tech'); // Neon's driver was left out of this pg bundle
    // The 350 KB budget (scripts/bundle.ts), croner (schedules) in: it catches a driver, an SDK or
    // Drizzle's database bundled by mistake.
    expect(Buffer.byteLength(worker)).toBeLessThanOrEqual(358_400);
    // The console is its own function: the worker's bundle carries none of it.
    expect(worker).not.toContain('skiplock-console');
    expect(Buffer.byteLength(readFileSync(join(unpacked, 'functions/console.mjs')))).toBeLessThan(450_000);
    // What serverless packages is what docs/bundle-sizes.md says (npm run bundle-report -- --write).
    const { bytes } = parseBundleSizes(read(BUNDLE_SIZES_PAGE));
    for (const fn of ['worker', 'console'] as const) {
      const packaged = readFileSync(join(unpacked, `functions/${fn}.mjs`)).byteLength;
      expect(Math.abs(packaged - bytes[fn].pg), `${fn}: ${packaged} bytes`).toBeLessThanOrEqual(BUNDLE_TOLERANCE_BYTES);
    }

    const url = inject('databaseUrl');
    const schema = 'sls_bundle_test';
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`drop schema if exists ${schema} cascade`);
    const db = connect({ connectionString: url });
    await migrate(db, { schema });
    await db.close();
    const saved = { ...process.env };
    Object.assign(process.env, { DATABASE_URL: url, SKIPLOCK_SCHEMA: schema, SKIPLOCK_LOG_LEVEL: 'error' });
    try {
      // A bundle that fails at import time (e.g. a statement built before drizzle is initialised) fails here.
      for (const file of ['worker', 'enqueue', 'replay', 'control', 'signal', 'console', 'maintenance']) {
        expect(typeof (await import(join(unpacked, `functions/${file}.mjs`))).handler).toBe('function');
      }
      const enqueue = (await import(join(unpacked, 'functions/enqueue.mjs'))).handler;
      const run = (await import(join(unpacked, 'functions/worker.mjs'))).handler;
      const control = (await import(join(unpacked, 'functions/control.mjs'))).handler;
      expect(await control({ action: 'list' })).toEqual({ status: 200, action: 'list', paused: [] });
      const payload = { to: 'a@example.com', subject: 's', template: 'welcome', idempotencyKey: 'k-1' };
      expect(await enqueue({ kind: 'send-email', payload })).toMatchObject({
        status: 200,
        results: [{ outcome: 'inserted' }],
      });
      // The template's kinds use zod/mini, which loads no messages of its own: in a process with
      // no other zod (as on Lambda), a bad payload still reads in English, not "Invalid input".
      const fresh = await promisify(execFile)(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `const { handler } = await import(${JSON.stringify(join(unpacked, 'functions/enqueue.mjs'))});
           const answer = await handler({ kind: 'send-email', payload: { to: 'nope', subject: '', template: 't', idempotencyKey: 'k' } });
           console.log(JSON.stringify(answer)); process.exit(0);`,
        ],
        { env: { ...process.env } },
      );
      const refused = JSON.parse(fresh.stdout.trim().split('\n').pop() as string);
      expect(refused.status).toBe(400);
      expect(refused.error.message).toMatch(
        /to: Invalid email address; subject: Too small: expected string to have >=1 characters/,
      );
      const deadline = Date.now() + 20_000;
      const summary = await run(
        { 'detail-type': 'Scheduled Event' },
        { getRemainingTimeInMillis: () => deadline - Date.now() },
      );
      expect(summary).toMatchObject({ claimed: 1, completed: 1 });
      // The scheduled invocation ticked the template's schedules: the nightly report is recorded,
      // its first occurrence the next 03:00 UTC (no cron of its own).
      const recorded = await admin.query(`select name, cron, kind from ${schema}.schedules`);
      expect(recorded.rows).toEqual([{ name: 'nightly-report', cron: '0 3 * * *', kind: 'build-report' }]);

      // The bundled console: log in over an HTTP API event, then the overview shows the job that ran.
      process.env.SKIPLOCK_ADMIN_TOKEN = 'bundle-admin-token-0123456789';
      const consoleHandler = (await import(join(unpacked, 'functions/console.mjs'))).handler;
      const event = (method: string, path: string, extra: Record<string, unknown> = {}) => ({
        rawPath: path,
        headers: { host: 'api.example.com', 'content-type': 'application/x-www-form-urlencoded' },
        requestContext: { http: { method, sourceIp: '192.0.2.10' } },
        ...extra,
      });
      const login = await consoleHandler(
        event('POST', '/admin/login', { body: `token=${process.env.SKIPLOCK_ADMIN_TOKEN}&name=ops` }),
      );
      expect(login.statusCode).toBe(303);
      const overview = await consoleHandler(event('GET', '/admin/', { cookies: [login.cookies[0].split(';')[0]] }));
      expect(overview.statusCode).toBe(200);
      expect(overview.body).toContain('send-email');
    } finally {
      process.env = saved;
      await admin.query(`drop schema if exists ${schema} cascade`);
      await admin.end();
    }
  });
});
