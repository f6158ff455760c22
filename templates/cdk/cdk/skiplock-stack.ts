// The skiplock app on AWS, as serverless.yml deploys it: two workers (each capped by
// reserved concurrency = SKIPLOCK_MAX_INVOCATIONS, fanning out by invoking itself), the enqueue
// function that nudges them, replay, control, signal, the console and maintenance; idle by default
// (one-off EventBridge Scheduler wake-ups, the fixed rules a 6-hour safety net); one role that reads
// the database secret, invokes the workers and arms skiplock's wake-ups, nothing broader; an HTTP
// API for enqueue, control, signal callbacks and the console; alarms on the EMF metrics. Edit freely.
import { resolve } from 'node:path';
import { ArnFormat, CfnOutput, Duration, Stack, type StackProps } from 'aws-cdk-lib';
import { HttpApi, HttpMethod } from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { Alarm, ComparisonOperator, Metric, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { ManagedPolicy, PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, Runtime } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';

export interface SkiplockStackProps extends StackProps {
  /** The Secrets Manager secret holding the database URL (or its parts). */
  databaseSecretArn: string;
  /** @defaultValue 'pg' */
  driver?: 'pg' | 'neon-ws' | 'neon-http' | undefined;
  /** @defaultValue 'skiplock' */
  schema?: string | undefined;
  /** POST /jobs's bearer; unset: the route refuses every request. */
  enqueueToken?: string | undefined;
  /** The console's and POST /control's token; unset: both refuse. */
  adminToken?: string | undefined;
  consoleViewerToken?: string | undefined;
  /** Signs signal callback tokens (POST /signal); unset: the route is off. */
  signalSecret?: string | undefined;
  webhookSigningSecret?: string | undefined;
  /**
   * true: an idle app leaves the database alone — each invocation arms the next one-off wake-up it
   * needs (EventBridge Scheduler) and the fixed rules only run every RECHECK as a safety net. false:
   * the workers tick every minute and maintenance every 10 minutes. @defaultValue true
   */
  idle?: boolean | undefined;
}

/**
 * Idle: the fixed rules' period, which is also SKIPLOCK_IDLE_RECHECK_MINUTES (the two must agree):
 * the longest a job written without skiplock's enqueue waits.
 */
const RECHECK = Duration.hours(6);

/** Each worker serves its queues; its reserved concurrency is its cap on invocations. */
const WORKERS = [
  { id: 'Worker', name: 'worker', queues: 'emails,webhooks', maxInvocations: 10, timeoutSeconds: 60 },
  { id: 'ReportsWorker', name: 'reports-worker', queues: 'reports', maxInvocations: 4, timeoutSeconds: 300 },
] as const;

/** The variables that are set: an unset token leaves its variable out, which turns its route off. */
const setOnly = (vars: Record<string, string | undefined>): Record<string, string> =>
  Object.fromEntries(Object.entries(vars).filter((entry): entry is [string, string] => Boolean(entry[1])));

export class SkiplockStack extends Stack {
  constructor(scope: Construct, id: string, props: SkiplockStackProps) {
    super(scope, id, props);
    const driver = props.driver ?? 'pg';
    // Names fixed up front: the workers' ARNs go into the role and SKIPLOCK_NUDGE_FUNCTIONS without
    // a reference from a function to itself (its fan-out invokes it), which would be a cycle.
    const nameOf = (name: string) => `${this.stackName}-${name}`;
    const arnOf = (name: string) =>
      this.formatArn({
        service: 'lambda',
        resource: 'function',
        resourceName: nameOf(name),
        arnFormat: ArnFormat.COLON_RESOURCE_NAME,
      });

    const role = new Role(this, 'Role', {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
      managedPolicies: [ManagedPolicy.fromAwsManagedPolicyName('service-role/AWSLambdaBasicExecutionRole')],
    });
    role.addToPolicy(
      new PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [props.databaseSecretArn] }),
    );
    role.addToPolicy(
      new PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: WORKERS.map((w) => arnOf(w.name)) }),
    );

    // Idle: EventBridge Scheduler runs the one-off wake-ups (named skiplock-<function>-<minute>) with
    // this role, which may invoke the workers and maintenance; the functions may arm them with it.
    const idle = props.idle ?? true;
    const wakeRole = new Role(this, 'WakeRole', {
      assumedBy: new ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': this.account } },
      }),
    });
    wakeRole.addToPolicy(
      new PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: [...WORKERS.map((w) => arnOf(w.name)), arnOf('maintenance')],
      }),
    );
    if (idle) {
      role.addToPolicy(
        new PolicyStatement({
          actions: ['scheduler:CreateSchedule'],
          resources: [
            this.formatArn({ service: 'scheduler', resource: 'schedule', resourceName: 'default/skiplock-*' }),
          ],
        }),
      );
      role.addToPolicy(new PolicyStatement({ actions: ['iam:PassRole'], resources: [wakeRole.roleArn] }));
    }
    const idleEnvironment: Record<string, string> = idle
      ? {
          SKIPLOCK_IDLE: 'true',
          SKIPLOCK_IDLE_RECHECK_MINUTES: String(RECHECK.toMinutes()),
          SKIPLOCK_WAKE_ROLE_ARN: wakeRole.roleArn,
          SKIPLOCK_MAINTENANCE_FUNCTION: nameOf('maintenance'),
        }
      : { SKIPLOCK_IDLE: 'false' };

    const fn = (
      id: string,
      name: string,
      entry: string,
      timeoutSeconds: number,
      environment: Record<string, string>,
      reservedConcurrentExecutions?: number,
    ) =>
      new NodejsFunction(this, id, {
        functionName: nameOf(name),
        entry: resolve('functions', entry),
        handler: 'handler',
        runtime: Runtime.NODEJS_22_X,
        architecture: Architecture.ARM_64,
        memorySize: 512,
        timeout: Duration.seconds(timeoutSeconds),
        reservedConcurrentExecutions,
        role,
        logGroup: new LogGroup(this, `${id}Logs`, { retention: RetentionDays.TWO_WEEKS }),
        environment: {
          NODE_OPTIONS: '--enable-source-maps',
          DATABASE_SECRET_ID: props.databaseSecretArn,
          SKIPLOCK_DRIVER: driver,
          SKIPLOCK_SCHEMA: props.schema ?? 'skiplock',
          SKIPLOCK_LEASE_GRACE_MS: '5000',
          SKIPLOCK_SAFETY_MARGIN_MS: '2000',
          SKIPLOCK_METRICS: 'emf',
          ...idleEnvironment,
          ...environment,
        },
        bundling: {
          format: OutputFormat.ESM,
          target: 'node22',
          minify: true,
          // The runtime has the AWS SDK; pg's optional native binding is never used.
          externalModules: ['@aws-sdk/*', 'pg-native'],
          // Only the configured driver is bundled.
          define: {
            'process.env.SKIPLOCK_BUNDLE_DRIVER': JSON.stringify(driver),
            'process.env.SKIPLOCK_BUNDLE_WEBSOCKET': JSON.stringify('global'),
          },
          banner: "import { createRequire } from 'module'; const require = createRequire(import.meta.url);",
        },
      });

    for (const w of WORKERS) {
      // Reserved concurrency = SKIPLOCK_MAX_INVOCATIONS: the platform's cap and the claim's agree.
      const environment = setOnly({
        SKIPLOCK_QUEUES: w.queues,
        SKIPLOCK_MAX_INVOCATIONS: String(w.maxInvocations),
        WEBHOOK_SIGNING_SECRET: props.webhookSigningSecret,
      });
      const worker = fn(w.id, w.name, 'worker.ts', w.timeoutSeconds, environment, w.maxInvocations);
      new Rule(this, `${w.id}Schedule`, {
        schedule: Schedule.rate(idle ? RECHECK : Duration.minutes(1)),
        targets: [new LambdaFunction(worker)],
      });
    }

    // After an enqueue, or a signal that woke a job, start the worker of its queue (asynchronous Invoke).
    const nudgeFunctions = WORKERS.map((w) => `${w.queues}=${nameOf(w.name)}`).join(';');
    const enqueue = fn(
      'Enqueue',
      'enqueue',
      'enqueue.ts',
      10,
      setOnly({ SKIPLOCK_ENQUEUE_TOKEN: props.enqueueToken, SKIPLOCK_NUDGE_FUNCTIONS: nudgeFunctions }),
    );
    // Replayed jobs start (and, idle, wake) their worker as an enqueue's do.
    fn('Replay', 'replay', 'replay.ts', 60, { SKIPLOCK_NUDGE_FUNCTIONS: nudgeFunctions });
    const control = fn('Control', 'control', 'control.ts', 10, setOnly({ SKIPLOCK_ADMIN_TOKEN: props.adminToken }));
    const signal = fn(
      'Signal',
      'signal',
      'signal.ts',
      10,
      setOnly({ SKIPLOCK_SIGNAL_SECRET: props.signalSecret, SKIPLOCK_NUDGE_FUNCTIONS: nudgeFunctions }),
    );
    const adminConsole = fn(
      'Console',
      'console',
      'console.ts',
      30,
      setOnly({
        SKIPLOCK_ADMIN_TOKEN: props.adminToken,
        SKIPLOCK_CONSOLE_VIEWER_TOKEN: props.consoleViewerToken,
      }),
    );
    const maintenance = fn('Maintenance', 'maintenance', 'maintenance.ts', 120, {
      SKIPLOCK_COMPLETED_RETENTION_HOURS: '24',
      SKIPLOCK_DEAD_RETENTION_HOURS: '720',
    });
    new Rule(this, 'MaintenanceSchedule', {
      schedule: Schedule.rate(idle ? RECHECK : Duration.minutes(10)),
      targets: [new LambdaFunction(maintenance)],
    });

    const api = new HttpApi(this, 'Http');
    const route = (path: string, methods: HttpMethod[], target: NodejsFunction) =>
      api.addRoutes({ path, methods, integration: new HttpLambdaIntegration(`${target.node.id}Integration`, target) });
    route('/jobs', [HttpMethod.POST], enqueue);
    route('/control', [HttpMethod.POST], control);
    route('/signal', [HttpMethod.POST], signal);
    route('/admin', [HttpMethod.GET], adminConsole);
    route('/admin/{proxy+}', [HttpMethod.ANY], adminConsole);
    new CfnOutput(this, 'HttpUrl', { value: api.apiEndpoint });

    const service = (name: string) => ({ Service: nameOf(name) });
    new Alarm(this, 'JobsDyingAlarm', {
      alarmDescription: 'Jobs went to the dead-letter queue (see `skiplock dlq list`)',
      metric: new Metric({
        namespace: 'skiplock',
        metricName: 'JobsDead',
        dimensionsMap: service('worker'),
        statistic: 'Sum',
        period: Duration.minutes(5),
      }),
      threshold: 0,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });
    new Alarm(this, 'OldestJobAlarm', {
      alarmDescription: 'The oldest ready job has waited more than 10 minutes (workers not keeping up or not running)',
      metric: new Metric({
        namespace: 'skiplock',
        metricName: 'OldestReadyAge',
        dimensionsMap: service('maintenance'),
        statistic: 'Maximum',
        period: Duration.minutes(10),
      }),
      threshold: 600,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      treatMissingData: TreatMissingData.BREACHING,
    });
    new Alarm(this, 'WorkerSilentAlarm', {
      alarmDescription: 'No successful worker invocation for 10 minutes',
      metric: new Metric({
        namespace: 'skiplock',
        metricName: 'SuccessfulInvocations',
        dimensionsMap: service('worker'),
        statistic: 'Sum',
        period: Duration.minutes(10),
      }),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.LESS_THAN_THRESHOLD,
      treatMissingData: TreatMissingData.BREACHING,
    });
  }
}
