/**
 * Reads what `serverless package` resolved into the CloudFormation template it writes
 * (cloudformation-template-update-stack.json): each function's name, handler, timeout, memory,
 * reserved concurrency and environment, its EventBridge schedules and its HTTP API routes. The
 * template rather than serverless.yml, because the framework has already applied the stage,
 * params and provider defaults there: the emulator runs what would be deployed.
 */
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';

export interface FunctionSpec {
  /** The deployed name (`skiplock-dev-worker`): what Invoke and SKIPLOCK_NUDGE_FUNCTIONS use. */
  name: string;
  /** `functions/worker.handler`: module path (no extension) and export. */
  handler: string;
  timeoutMs: number;
  memoryMb: number;
  /** ReservedConcurrentExecutions; undefined = no cap of its own. */
  reservedConcurrency: number | undefined;
  /** The variables whose values the template holds as plain strings. */
  environment: Record<string, string>;
  /** The function's .zip in the package folder. */
  zipFile: string;
}

export interface ScheduleSpec {
  functionName: string;
  /** `rate(1 minute)` or `cron(…)`, as EventBridge takes it. */
  expression: string;
  enabled: boolean;
}

export interface HttpRouteSpec {
  /** `POST`, or `ANY`. */
  method: string;
  /** `/jobs`, `/items/{id}`, `/{proxy+}`, or `$default`. */
  path: string;
  functionName: string;
}

export interface PackagedTemplate {
  functions: FunctionSpec[];
  schedules: ScheduleSpec[];
  routes: HttpRouteSpec[];
  /** What could not be read offline (an environment value that is a CloudFormation expression). */
  warnings: string[];
}

type Resource = { Type: string; Properties: Record<string, unknown> };

// Lambda's defaults when the template leaves them out.
const DEFAULT_TIMEOUT_S = 3;
const DEFAULT_MEMORY_MB = 128;

export function readPackagedTemplate(packageDir: string): PackagedTemplate {
  const file = join(packageDir, 'cloudformation-template-update-stack.json');
  const { Resources: resources } = JSON.parse(readFileSync(file, 'utf8')) as { Resources: Record<string, Resource> };
  const warnings: string[] = [];
  const names = new Map<string, string>(); // logical id → function name
  const functions: FunctionSpec[] = [];

  for (const [logicalId, { Type, Properties: p }] of Object.entries(resources)) {
    if (Type !== 'AWS::Lambda::Function') continue;
    const name = p.FunctionName;
    const key = (p.Code as { S3Key?: unknown } | undefined)?.S3Key;
    if (typeof name !== 'string' || typeof p.Handler !== 'string' || typeof key !== 'string')
      throw new Error(`${file}: ${logicalId} has no plain FunctionName, Handler or Code.S3Key`);
    names.set(logicalId, name);
    const environment: Record<string, string> = {};
    const variables = (p.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {};
    for (const [variable, value] of Object.entries(variables)) {
      if (typeof value === 'string') environment[variable] = value;
      else warnings.push(`${name}: ${variable} is a CloudFormation expression, left unset`);
    }
    functions.push({
      name,
      handler: p.Handler,
      timeoutMs: (typeof p.Timeout === 'number' ? p.Timeout : DEFAULT_TIMEOUT_S) * 1000,
      memoryMb: typeof p.MemorySize === 'number' ? p.MemorySize : DEFAULT_MEMORY_MB,
      reservedConcurrency:
        typeof p.ReservedConcurrentExecutions === 'number' ? p.ReservedConcurrentExecutions : undefined,
      environment,
      zipFile: join(packageDir, basename(key)),
    });
  }

  // A rule or an integration names its function by `Fn::GetAtt: [LogicalId, Arn]`.
  const targetOf = (arn: unknown) => {
    const logicalId = (arn as { 'Fn::GetAtt'?: unknown[] } | undefined)?.['Fn::GetAtt']?.[0];
    return typeof logicalId === 'string' ? names.get(logicalId) : undefined;
  };

  const schedules: ScheduleSpec[] = [];
  for (const { Type, Properties: p } of Object.values(resources)) {
    if (Type !== 'AWS::Events::Rule' || typeof p.ScheduleExpression !== 'string') continue;
    for (const target of (p.Targets as { Arn: unknown }[] | undefined) ?? []) {
      const functionName = targetOf(target.Arn);
      if (functionName)
        schedules.push({ functionName, expression: p.ScheduleExpression, enabled: p.State !== 'DISABLED' });
    }
  }

  const routes: HttpRouteSpec[] = [];
  for (const { Type, Properties: p } of Object.values(resources)) {
    if (Type !== 'AWS::ApiGatewayV2::Route' || typeof p.RouteKey !== 'string') continue;
    // Target: `Fn::Join: ['/', ['integrations', { Ref: <integration> }]]`.
    const parts = (p.Target as { 'Fn::Join'?: [string, unknown[]] } | undefined)?.['Fn::Join']?.[1] ?? [];
    const ref = (parts[1] as { Ref?: string } | undefined)?.Ref;
    const integration = ref ? resources[ref] : undefined;
    const functionName = targetOf(integration?.Properties.IntegrationUri);
    if (!functionName) {
      warnings.push(`route ${p.RouteKey}: no Lambda integration found, not served`);
      continue;
    }
    if (integration?.Properties.PayloadFormatVersion !== '2.0')
      warnings.push(
        `route ${p.RouteKey}: payload format ${String(integration?.Properties.PayloadFormatVersion)}, served as 2.0`,
      );
    const [method, path] = p.RouteKey === '$default' ? ['ANY', '$default'] : p.RouteKey.split(' ');
    routes.push({ method: method ?? 'ANY', path: path ?? '/', functionName });
  }
  return { functions, schedules, routes, warnings };
}
