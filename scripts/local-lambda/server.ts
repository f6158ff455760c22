/**
 * A local AWS Lambda for the packaged app: the Invoke API
 * (`POST /2015-03-31/functions/{name}/invocations`, what `@aws-sdk/client-lambda` calls when
 * AWS_ENDPOINT_URL_LAMBDA points here) over the bundles `serverless package` wrote, each function
 * run by a FunctionRunner under its own timeout and reserved concurrency.
 *
 * Why not serverless-offline (13.10.1, the last for Serverless Framework v3): an Event invocation
 * that throws or times out crashes the whole emulator; after one timeout a function answers 504
 * forever (dherault/serverless-offline#1896, fixed only for v4); and reservedConcurrency is
 * ignored — the three things the nudge and fan-out tests need.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildRuntime, unpackFunctions } from './code.js';
import {
  FunctionRunner,
  type FunctionStats,
  type InvocationRecord,
  type InvocationType,
  type Outcome,
} from './function-runner.js';
import { type FunctionSpec, type PackagedTemplate, readPackagedTemplate } from './template.js';

export type { FunctionStats, InvocationRecord, Outcome };

export interface LocalLambdaOptions {
  /** The folder `serverless package` wrote (`.serverless`, or its `--package`). */
  packageDir: string;
  /** Where the bundles are unzipped (emptied first): a folder inside the project (see code.ts). */
  codeDir: string;
  /** @defaultValue 0 (any free port) */
  port?: number;
  /** Variables set on every function over the template's (DATABASE_URL in dev mode and tests). */
  environment?: Record<string, string>;
  /** A warm environment left idle this long is stopped. @defaultValue 10 minutes */
  idleMs?: number;
  /** Each line a function writes. @defaultValue printed with the function's name */
  onLog?: (functionName: string, line: string) => void;
}

export interface LocalLambda {
  /** The endpoint: AWS_ENDPOINT_URL_LAMBDA for SDK clients (the functions' own is set to it). */
  url: string;
  template: PackagedTemplate;
  /** Every finished invocation, oldest first. */
  invocations: readonly InvocationRecord[];
  /** The same rules as the Invoke API; `throttled` where it answers 429. */
  invoke(functionName: string, event: unknown, type?: InvocationType): Promise<Outcome | 'throttled'>;
  /** Resolves with the first finished invocation (past or future) that matches. */
  waitFor(match: (record: InvocationRecord) => boolean): Promise<InvocationRecord>;
  stats(functionName: string): FunctionStats;
  /** Resolves when no function runs or has events waiting. */
  idle(): Promise<void>;
  /** Stops the server and every environment (SIGKILL); queued events are dropped. */
  close(): Promise<void>;
}

// Lambda's payload limit for a synchronous invocation.
const MAX_PAYLOAD_BYTES = 6 * 1024 * 1024;
const LOCAL_ACCOUNT = '000000000000';

export async function startLocalLambda(options: LocalLambdaOptions): Promise<LocalLambda> {
  const template = readPackagedTemplate(options.packageDir);
  rmSync(options.codeDir, { recursive: true, force: true });
  mkdirSync(options.codeDir, { recursive: true });
  const [folders, runtimeFile] = await Promise.all([
    unpackFunctions(template.functions, options.codeDir),
    buildRuntime(options.codeDir).catch((err: unknown) => {
      throw new Error(`cannot compile the emulator's runtime: ${String(err)}`);
    }),
  ]);

  const invocations: InvocationRecord[] = [];
  const waiters: { match(r: InvocationRecord): boolean; resolve(r: InvocationRecord): void }[] = [];
  let idleWaiters: (() => void)[] = [];
  const runners = new Map<string, FunctionRunner>();
  const quiet = () => [...runners.values()].every((r) => r.quiet);
  const onInvocation = (record: InvocationRecord) => {
    invocations.push(record);
    for (const w of waiters.splice(0)) {
      if (w.match(record)) w.resolve(record);
      else waiters.push(w);
    }
    // A queued event starts in the same tick as this record: look once that has happened.
    queueMicrotask(() => {
      if (!quiet()) return;
      for (const resolve of idleWaiters) resolve();
      idleWaiters = [];
    });
  };
  const onLog = options.onLog ?? ((name, line) => process.stdout.write(`[${name}] ${line}\n`));

  // A request that fails here (a client gone mid-body) fails alone, never the server.
  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) res.destroy();
      else reply(res, 500, { Type: 'Service', message: String(err) }, 'ServiceException');
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  for (const fn of template.functions) {
    const taskRoot = folders.get(fn.name) as string;
    runners.set(
      fn.name,
      new FunctionRunner(fn, {
        runtimeFile,
        codeDir: taskRoot,
        env: environmentOf(fn, taskRoot, url, options.environment ?? {}),
        idleMs: options.idleMs ?? 600_000,
        onLog,
        onInvocation,
      }),
    );
  }

  const runnerOf = (id: string) => runners.get(functionNameOf(id));

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const match = /^\/2015-03-31\/functions\/([^/]+)\/invocations(?:\?|$)/.exec(req.url ?? '');
    if (req.method !== 'POST' || !match)
      return reply(
        res,
        404,
        { Type: 'User', message: `no such operation: ${req.method} ${req.url}` },
        'UnknownOperationException',
      );
    const id = decodeURIComponent(match[1] as string);
    const runner = runnerOf(id);
    const body = await readBody(req);
    if (!runner)
      return reply(
        res,
        404,
        { Type: 'User', message: `Function not found: ${arnOf(id)}` },
        'ResourceNotFoundException',
      );
    if (body === undefined)
      return reply(
        res,
        413,
        { Type: 'User', message: 'Request must be smaller than 6291456 bytes' },
        'RequestTooLargeException',
      );
    let event: unknown = {};
    try {
      if (body.length > 0) event = JSON.parse(body.toString('utf8'));
    } catch (err) {
      return reply(
        res,
        400,
        { Type: 'User', message: `Could not parse request body into json: ${String(err)}` },
        'InvalidRequestContentException',
      );
    }
    const type = String(req.headers['x-amz-invocation-type'] ?? 'RequestResponse');
    if (type === 'DryRun') return reply(res, 204, undefined);
    if (type === 'Event') {
      void runner.invokeAsync(event);
      return reply(res, 202, undefined);
    }
    const running = runner.invokeSync(event);
    if (!running)
      return reply(
        res,
        429,
        { Type: 'User', message: 'Rate Exceeded.', Reason: 'ReservedFunctionConcurrentInvocationLimitExceeded' },
        'TooManyRequestsException',
      );
    const outcome = await running;
    res.writeHead(200, {
      'content-type': 'application/json',
      'x-amz-executed-version': '$LATEST',
      ...(outcome.ok ? {} : { 'x-amz-function-error': 'Unhandled' }),
    });
    res.end(JSON.stringify(outcome.ok ? outcome.result : outcome.error));
  }

  return {
    url,
    template,
    invocations,
    async invoke(functionName, event, type = 'RequestResponse') {
      const runner = runnerOf(functionName);
      if (!runner) throw new Error(`Function not found: ${functionName}`);
      if (type === 'Event') return runner.invokeAsync(event);
      return (await runner.invokeSync(event)) ?? 'throttled';
    },
    waitFor(match) {
      const found = invocations.find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
    stats(functionName) {
      const runner = runnerOf(functionName);
      if (!runner) throw new Error(`Function not found: ${functionName}`);
      return runner.stats;
    },
    idle: () => (quiet() ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve))),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([...runners.values()].map((r) => r.close()));
      for (const resolve of idleWaiters) resolve();
    },
  };
}

/**
 * The variables of a function's environments. Of this process's environment only PATH and AWS_*
 * pass (a region and credentials for the SDK; the local endpoints accept any), then the template's
 * variables and the overrides; the variables Lambda reserves come last, as Lambda forbids setting
 * them. The functions' Lambda client always reaches this emulator: a nudge or a fan-out must never
 * start a real function.
 */
function environmentOf(
  fn: FunctionSpec,
  taskRoot: string,
  url: string,
  overrides: Record<string, string>,
): Record<string, string> {
  const fromProcess = Object.entries(process.env).filter(
    (entry): entry is [string, string] =>
      (entry[0] === 'PATH' || entry[0].startsWith('AWS_')) && entry[1] !== undefined,
  );
  const region = process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
  return {
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    ...Object.fromEntries(fromProcess),
    ...fn.environment,
    ...overrides,
    AWS_REGION: region,
    AWS_DEFAULT_REGION: region,
    AWS_LAMBDA_FUNCTION_NAME: fn.name,
    AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(fn.memoryMb),
    AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${fn.name}`,
    AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs_local',
    AWS_ENDPOINT_URL_LAMBDA: url,
    LAMBDA_TASK_ROOT: taskRoot,
    _HANDLER: fn.handler,
    TZ: 'UTC',
  };
}

/** `name`, `name:alias`, `123456789012:function:name` or a full ARN → the function's name. */
function functionNameOf(id: string): string {
  const parts = id.split(':');
  const at = parts.indexOf('function');
  return (at >= 0 ? parts[at + 1] : parts[0]) ?? id;
}

function arnOf(id: string): string {
  return id.startsWith('arn:') ? id : `arn:aws:lambda:us-east-1:${LOCAL_ACCOUNT}:function:${functionNameOf(id)}`;
}

/** The request body, or undefined past Lambda's payload limit. */
async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_PAYLOAD_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** A JSON reply; an error carries its type in `x-amzn-errortype`, where the SDK reads it. */
function reply(res: ServerResponse, status: number, body: unknown, errorType?: string) {
  res.writeHead(status, {
    'content-type': 'application/json',
    ...(errorType ? { 'x-amzn-errortype': errorType } : {}),
  });
  res.end(body === undefined ? '' : JSON.stringify(body));
}
