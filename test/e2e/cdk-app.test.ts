// An AWS CDK app as a user makes one: the packed package installed beside aws-cdk-lib and the cdk
// CLI, `skiplock init cdk`, `cdk synth` offline (no AWS credentials), the template checked with
// aws-cdk-lib/assertions, and the bundled enqueue and worker functions run against Postgres.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Match, Template } from 'aws-cdk-lib/assertions';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { BUNDLE_SIZES_PAGE, BUNDLE_TOLERANCE_BYTES, parseBundleSizes } from '../../scripts/bundle-figures.js';
import { offlineCdkSynth, tableAfter } from '../helpers/markdown.js';
import { npm, packedTarball } from '../helpers/packed.js';

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, '../..');
const app = mkdtempSync(join(tmpdir(), 'skiplock-cdk-'));
const schema = `cdk_${process.pid}`;
const secretArn = 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:app/database-AbCdEf';
const versionOf = (name: string) =>
  (JSON.parse(readFileSync(join(repo, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
/** The offline `cdk synth` of docs/deploy-lambda.md: its variables and flags are what this test uses. */
const offline = offlineCdkSynth(readFileSync(join(repo, 'docs/deploy-lambda.md'), 'utf8'));
/** The cdk CLI as the user runs it offline, with no AWS credentials or region anywhere. */
const cdk = (args: string[]) => {
  if (!offline) throw new Error('docs/deploy-lambda.md shows no offline `… npx cdk synth --no-notices …` line');
  return run(join(app, 'node_modules/.bin/cdk'), [...args, ...offline.flags], {
    cwd: app,
    env: { PATH: process.env.PATH, HOME: app, ...offline.env },
    timeout: 180_000,
  });
};
let template: Template;
let json: {
  Resources: Record<string, { Type: string; Properties: Record<string, unknown>; Metadata?: Record<string, string> }>;
};

beforeAll(async () => {
  const tarball = await packedTarball();
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'my-cdk-app', private: true }));
  const deps = ['aws-cdk-lib', 'constructs', 'aws-cdk', 'esbuild', 'tsx', 'zod', 'drizzle-orm'];
  await npm(['install', tarball, ...deps.map((name) => `${name}@${versionOf(name)}`)], app);
  await run(join(app, 'node_modules/.bin/skiplock'), ['init', 'cdk'], { cwd: app });
}, 300_000);

afterAll(async () => {
  const admin = new pg.Client({ connectionString: inject('databaseUrl') });
  await admin.connect();
  await admin.query(`drop schema if exists ${schema} cascade`);
  await admin.end();
  rmSync(app, { recursive: true, force: true });
});

describe('an AWS CDK app from `skiplock init cdk`', () => {
  it('without the database secret, `cdk synth` stops with what to set', async () => {
    const failed = await cdk(['synth', '-q']).then(
      () => undefined,
      (err: { stderr: string }) => err.stderr,
    );
    expect(failed).toMatch(/set the context value databaseSecretArn/);
  }, 180_000);

  it('`cdk synth` bundles every function offline; the stack has their schedules, caps, IAM, routes and alarms', async () => {
    await cdk(['synth', '-q', '-c', `databaseSecretArn=${secretArn}`, '-c', 'enqueueToken=enqueue-token-0123456789']);
    json = JSON.parse(readFileSync(join(app, 'cdk.out/skiplock.template.json'), 'utf8'));
    template = Template.fromJSON(json);

    template.resourceCountIs('AWS::Lambda::Function', 8);
    template.allResourcesProperties('AWS::Lambda::Function', {
      Runtime: 'nodejs22.x',
      Handler: 'index.handler',
      Environment: { Variables: Match.objectLike({ DATABASE_SECRET_ID: secretArn, SKIPLOCK_DRIVER: 'pg' }) },
    });
    // Each worker's reserved concurrency is its SKIPLOCK_MAX_INVOCATIONS; timeouts leave the leases room.
    for (const [name, queues, cap, timeout] of [
      ['skiplock-worker', 'emails,webhooks', 10, 60],
      ['skiplock-reports-worker', 'reports', 4, 300],
    ] as const) {
      template.hasResourceProperties('AWS::Lambda::Function', {
        FunctionName: name,
        Timeout: timeout,
        ReservedConcurrentExecutions: cap,
        Environment: {
          Variables: Match.objectLike({ SKIPLOCK_QUEUES: queues, SKIPLOCK_MAX_INVOCATIONS: String(cap) }),
        },
      });
    }
    template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'skiplock-enqueue',
      Environment: {
        Variables: Match.objectLike({
          SKIPLOCK_ENQUEUE_TOKEN: 'enqueue-token-0123456789',
          SKIPLOCK_NUDGE_FUNCTIONS: 'emails,webhooks=skiplock-worker;reports=skiplock-reports-worker',
        }),
      },
    });
    template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'skiplock-signal',
      Environment: {
        Variables: Match.objectLike({
          SKIPLOCK_NUDGE_FUNCTIONS: 'emails,webhooks=skiplock-worker;reports=skiplock-reports-worker',
        }),
      },
    });
    // No admin token given: the console and control have no variable for it, so they refuse.
    template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'skiplock-console',
      Environment: { Variables: Match.objectLike({ SKIPLOCK_ADMIN_TOKEN: Match.absent() }) },
    });

    const schedules = Object.values(template.findResources('AWS::Events::Rule')).map(
      (r) => (r.Properties as { ScheduleExpression: string }).ScheduleExpression,
    );
    // Idle (the default): the fixed rules are the 6-hour safety net SKIPLOCK_IDLE_RECHECK_MINUTES names.
    expect(schedules.sort()).toEqual(['rate(6 hours)', 'rate(6 hours)', 'rate(6 hours)']);
    for (const name of ['skiplock-worker', 'skiplock-reports-worker', 'skiplock-maintenance']) {
      template.hasResourceProperties('AWS::Lambda::Function', {
        FunctionName: name,
        Environment: {
          Variables: Match.objectLike({
            SKIPLOCK_IDLE: 'true',
            SKIPLOCK_IDLE_RECHECK_MINUTES: '360',
            SKIPLOCK_WAKE_ROLE_ARN: { 'Fn::GetAtt': [Match.stringLikeRegexp('^WakeRole'), 'Arn'] },
            SKIPLOCK_MAINTENANCE_FUNCTION: 'skiplock-maintenance',
          }),
        },
      });
    }

    // The functions' role reads the database secret, invokes the two workers (nudges, fan-out) and
    // arms skiplock-* wake-ups with the wake role, nothing more; the wake role, assumed by
    // EventBridge Scheduler, invokes the workers and maintenance.
    template.resourceCountIs('AWS::IAM::Policy', 2);
    const policies = Object.entries(template.findResources('AWS::IAM::Policy')).map(
      ([id, p]) =>
        [
          id,
          (p.Properties as { PolicyDocument: { Statement: { Action: string; Resource: unknown }[] } }).PolicyDocument
            .Statement,
        ] as const,
    );
    const statements = policies.find(([id]) => id.startsWith('RoleDefaultPolicy'))![1];
    expect(statements.map((s) => s.Action)).toEqual([
      'secretsmanager:GetSecretValue',
      'lambda:InvokeFunction',
      'scheduler:CreateSchedule',
      'iam:PassRole',
    ]);
    expect(statements[0]!.Resource).toBe(secretArn);
    expect(JSON.stringify(statements[1]!.Resource)).toMatch(
      /function:skiplock-worker".*function:skiplock-reports-worker"/,
    );
    expect(JSON.stringify(statements[2]!.Resource)).toMatch(/:schedule\/default\/skiplock-\*"/);
    expect(statements[3]!.Resource).toEqual({ 'Fn::GetAtt': [expect.stringMatching(/^WakeRole/), 'Arn'] });
    const wake = policies.find(([id]) => id.startsWith('WakeRole'))![1];
    expect(wake.map((s) => s.Action)).toEqual(['lambda:InvokeFunction']);
    expect(JSON.stringify(wake[0]!.Resource)).toMatch(
      /function:skiplock-worker".*function:skiplock-reports-worker".*function:skiplock-maintenance"/,
    );
    template.hasResourceProperties('AWS::IAM::Role', {
      AssumeRolePolicyDocument: {
        Statement: [Match.objectLike({ Principal: { Service: 'scheduler.amazonaws.com' } })],
      },
    });

    const routes = Object.values(template.findResources('AWS::ApiGatewayV2::Route')).map(
      (r) => (r.Properties as { RouteKey: string }).RouteKey,
    );
    expect(routes.sort()).toEqual(['ANY /admin/{proxy+}', 'GET /admin', 'POST /control', 'POST /jobs', 'POST /signal']);
    template.resourceCountIs('AWS::CloudWatch::Alarm', 3);
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'JobsDead',
      Dimensions: [{ Name: 'Service', Value: 'skiplock-worker' }],
    });
  }, 180_000);

  it("deploy-lambda.md's functions table names each function as serverless.yml and the synthesized stack do", () => {
    // serverless.yml's functions, in order, with their timeouts.
    const yml = readFileSync(join(repo, 'serverless.yml'), 'utf8');
    const section = yml.slice(yml.indexOf('\nfunctions:\n')).split(/\n(?=\S)/)[1] ?? '';
    const serverless = [...section.matchAll(/^ {2}(\w+):\n((?: {4}.*\n|\s*\n)*)/gm)].map(([, name, body]) => ({
      name: name as string,
      timeout: Number(/^ {4}timeout: (\d+)$/m.exec(body as string)?.[1]),
    }));
    const synthesized = new Map(
      Object.values(json.Resources)
        .filter((r) => r.Type === 'AWS::Lambda::Function')
        .map((r) => [r.Properties.FunctionName as string, r.Properties.Timeout as number]),
    );
    const rows = tableAfter(readFileSync(join(repo, 'docs/deploy-lambda.md'), 'utf8'), /^\| serverless\.yml \| CDK/);
    const names = rows.map(([sls = '', stack = '']) => [sls.replaceAll('`', ''), stack.replaceAll('`', '')]);
    expect(names.map(([sls]) => sls)).toEqual(serverless.map((f) => f.name));
    expect(names.map(([, stack]) => stack).sort()).toEqual([...synthesized.keys()].sort());
    // Each row pairs the same function: the CDK name is the serverless.yml name in kebab case, and
    // both deploy it with the same timeout.
    for (const [sls = '', stack = ''] of names) {
      expect(stack).toBe(`skiplock-${sls.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
      expect(synthesized.get(stack), stack).toBe(serverless.find((f) => f.name === sls)?.timeout);
    }
  });

  it('the bundled enqueue and worker run a job on Postgres, as Lambda runs them', async () => {
    const assetOf = (functionName: string) => {
      const [resource] = Object.values(json.Resources).filter(
        (r) => r.Type === 'AWS::Lambda::Function' && r.Properties.FunctionName === functionName,
      );
      return join(app, 'cdk.out', resource!.Metadata!['aws:asset:path']!, 'index.mjs');
    };
    const worker = readFileSync(assetOf('skiplock-worker'), 'utf8');
    expect(worker).toContain('skiplock'); // bundled from the installed package
    expect(worker).not.toContain('neon.tech'); // the pg driver only
    // What synth bundles is what docs/bundle-sizes.md says (npm run bundle-report -- --write).
    const { bytes } = parseBundleSizes(readFileSync(join(repo, BUNDLE_SIZES_PAGE), 'utf8'));
    for (const [fn, functionName] of [
      ['worker', 'skiplock-worker'],
      ['console', 'skiplock-console'],
    ] as const) {
      const synthesized = readFileSync(assetOf(functionName)).byteLength;
      expect(Math.abs(synthesized - bytes[fn].pg), `${fn}: ${synthesized} bytes`).toBeLessThanOrEqual(
        BUNDLE_TOLERANCE_BYTES,
      );
    }

    const url = inject('databaseUrl');
    await run(join(app, 'node_modules/.bin/skiplock'), ['migrate', '--schema', schema], {
      cwd: app,
      env: { ...process.env, DATABASE_URL: url },
    });
    const invoke = async (fn: string, event: unknown) => {
      const { stdout } = await run(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `const { handler } = await import(${JSON.stringify(assetOf(fn))});
           const result = await handler(${JSON.stringify(event)}, { getRemainingTimeInMillis: () => 30000 });
           process.stdout.write('\\nRESULT ' + JSON.stringify(result));`,
        ],
        {
          env: { PATH: process.env.PATH, SKIPLOCK_LOG_LEVEL: 'error', DATABASE_URL: url, SKIPLOCK_SCHEMA: schema },
          timeout: 60_000,
        },
      );
      return JSON.parse(stdout.slice(stdout.lastIndexOf('\nRESULT ') + 8));
    };
    const payload = { to: 'a@example.com', subject: 's', template: 'welcome', idempotencyKey: 'cdk-1' };
    expect(await invoke('skiplock-enqueue', { kind: 'send-email', payload })).toMatchObject({
      status: 200,
      results: [{ outcome: 'inserted' }],
    });
    expect(await invoke('skiplock-worker', { 'detail-type': 'Scheduled Event' })).toMatchObject({
      claimed: 1,
      completed: 1,
      stoppedBecause: 'drained',
    });
  }, 120_000);
});
