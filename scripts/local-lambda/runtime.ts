/**
 * One execution environment of the local Lambda emulator: a child process the server forks. It
 * imports the function's bundle once, at start (Lambda's init phase), then runs one invocation at
 * a time for as long as the server keeps it warm — so module state (a database pool, a cached
 * secret, the nudger's coalescing) lives across invocations as it does on Lambda. Where the code
 * is and which export is the handler come from LAMBDA_TASK_ROOT and _HANDLER, as on Lambda.
 *
 * The server bundles this file with esbuild into plain JavaScript before forking it, so a cold
 * start costs Node's start and the bundle's import, not a TypeScript loader.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { FunctionErrorPayload, InvokeMessage, RuntimeReply } from './protocol.js';

type Handler = (event: unknown, context: object) => unknown;

function errorPayload(err: unknown, errorType?: string): FunctionErrorPayload {
  if (err instanceof Error)
    return { errorType: errorType ?? err.name, errorMessage: err.message, trace: err.stack?.split('\n') ?? [] };
  return { errorType: errorType ?? typeof err, errorMessage: String(err) };
}

class RuntimeError extends Error {
  constructor(
    readonly errorType: string,
    message: string,
  ) {
    super(message);
  }
}

async function loadHandler(): Promise<Handler> {
  const spec = process.env._HANDLER ?? '';
  const dot = spec.lastIndexOf('.');
  const base = join(process.env.LAMBDA_TASK_ROOT ?? process.cwd(), spec.slice(0, dot));
  // The extensions Lambda's Node.js runtime tries for the handler's module.
  const file = ['.mjs', '.js', '.cjs'].map((ext) => base + ext).find((f) => existsSync(f));
  if (dot < 0 || !file)
    throw new RuntimeError('Runtime.ImportModuleError', `Error: Cannot find module '${spec.slice(0, dot)}'`);
  const module = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  const handler = module[spec.slice(dot + 1)];
  if (typeof handler !== 'function')
    throw new RuntimeError('Runtime.HandlerNotFound', `${spec} is undefined or not exported`);
  return handler as Handler;
}

// Init starts now, before the first invocation arrives; a failure is that invocation's error.
const handler = loadHandler();
handler.catch(() => {});

let current: string | undefined;

function reply(message: RuntimeReply): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) return resolve();
    process.send(message, undefined, undefined, () => resolve());
  });
}

/** The context object Lambda passes: the members handlers read, with the remaining time. */
function contextFor(message: InvokeMessage) {
  const name = process.env.AWS_LAMBDA_FUNCTION_NAME ?? '';
  return {
    awsRequestId: message.requestId,
    functionName: name,
    functionVersion: process.env.AWS_LAMBDA_FUNCTION_VERSION ?? '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${process.env.AWS_REGION}:000000000000:function:${name}`,
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE ?? '',
    logGroupName: `/aws/lambda/${name}`,
    logStreamName: `local/${process.pid}`,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, message.deadline - Date.now()),
  };
}

process.on('message', async (message: InvokeMessage) => {
  current = message.requestId;
  try {
    const result = await (await handler)(message.event, contextFor(message));
    await reply({ requestId: message.requestId, ok: true, result: result === undefined ? null : result });
  } catch (err) {
    // An environment whose init failed is not reused: the next invocation starts a fresh one.
    const initFailed = err instanceof RuntimeError;
    await reply({
      requestId: message.requestId,
      ok: false,
      error: errorPayload(err, initFailed ? err.errorType : undefined),
      exiting: initFailed,
    });
    if (initFailed) process.exit(1);
  }
  current = undefined;
});

// A throw outside the handler's promise fails the running invocation and ends the environment,
// as on Lambda; the server starts a new one for the next invocation.
async function crash(err: unknown, errorType?: string) {
  if (current) await reply({ requestId: current, ok: false, error: errorPayload(err, errorType), exiting: true });
  process.exit(129);
}
process.on('uncaughtException', (err) => void crash(err));
process.on('unhandledRejection', (reason) => void crash(reason, 'Runtime.UnhandledPromiseRejection'));
// The server went away (closed, or killed): never outlive it.
process.on('disconnect', () => process.exit(0));
// Ctrl-C in a terminal reaches the whole process group; the server stops its environments itself.
process.on('SIGINT', () => {});
