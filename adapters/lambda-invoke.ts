import { ConfigError } from '../base/errors.js';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import { createNudger, describeError, type Nudger } from '../core/nudge.js';
import type { InvocationStarter } from '../core/worker.js';
import { importOptionalPeer } from './optional-peer.js';

/** The event a started worker receives: any event runs the worker; this one says why. */
export const FAN_OUT_EVENT = { source: 'skiplock', reason: 'fan-out' } as const;
/** The event a nudged worker receives. */
export const NUDGE_EVENT = { source: 'skiplock', reason: 'nudge' } as const;

/** The worker was asked to fan out, but the AWS SDK's Lambda client cannot be loaded. */
export class MissingLambdaClientError extends ConfigError {
  constructor() {
    super(
      'SKIPLOCK_MAX_INVOCATIONS asks the worker to fan out, but @aws-sdk/client-lambda is not installed: add it to ' +
        'your app (npm install @aws-sdk/client-lambda; the Lambda Node.js runtime already ships it)',
    );
  }
}

/**
 * The AWS SDK's Lambda client, loaded on the first start: an optional peer dependency (the Lambda
 * Node.js runtime ships it), so the package root and an app that never fans out never load it.
 * `AWS_ENDPOINT_URL_LAMBDA` points it elsewhere (a local Invoke endpoint), as for any SDK client.
 */
function loadLambdaClient(): Promise<typeof import('@aws-sdk/client-lambda')> {
  return importOptionalPeer(
    () => import(/* webpackIgnore: true */ /* turbopackIgnore: true */ '@aws-sdk/client-lambda'),
    () => new MissingLambdaClientError(),
  );
}

type Client = { client: import('@aws-sdk/client-lambda').LambdaClient; sdk: typeof import('@aws-sdk/client-lambda') };
/** One client per container (per endpoint: AWS_ENDPOINT_URL_LAMBDA is read when a client is made). */
const clients = new Map<string, Client>();

async function lambdaClient(): Promise<Client> {
  const endpoint = process.env.AWS_ENDPOINT_URL_LAMBDA ?? '';
  let client = clients.get(endpoint);
  if (!client) {
    const sdk = await loadLambdaClient();
    // Bounded: an Invoke is an asynchronous start that Lambda accepts at once; a target that takes a
    // connection and never answers must not hold a nudge (or a fan-out) for the SDK's defaults.
    client = {
      sdk,
      client: new sdk.LambdaClient({
        requestHandler: { connectionTimeout: 1_000, requestTimeout: 3_000 },
        maxAttempts: 2,
      }),
    };
    clients.set(endpoint, client);
  }
  return client;
}

/**
 * Starts invocations of a Lambda function (the worker's own, for fan-out) with asynchronous
 * Invokes (`InvocationType: 'Event'`): Lambda queues them and answers 202 at once; its own
 * concurrency limit (the function's reserved concurrency) and retries apply. Needs
 * `lambda:InvokeFunction` on that function.
 */
export function lambdaStarter(functionName: string, event: object = FAN_OUT_EVENT): InvocationStarter {
  return {
    async start(count) {
      const { sdk, client } = await lambdaClient();
      const payload = new TextEncoder().encode(JSON.stringify(event));
      const results = await Promise.allSettled(
        Array.from({ length: count }, () =>
          client.send(new sdk.InvokeCommand({ FunctionName: functionName, InvocationType: 'Event', Payload: payload })),
        ),
      );
      const failed = results.filter((r) => r.status === 'rejected').length;
      if (failed > 0) {
        const first = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
        // The SDK's own error, not only its name: what the log line needs to say why (#28 b).
        throw new Error(
          `${failed} of ${count} asynchronous invokes of ${functionName} failed: ${describeError(first.reason)}`,
        );
      }
    },
  };
}

/**
 * Which worker function runs each queue, for nudges: `{ emails: 'app-prod-worker', '*': … }`
 * (`*`: every queue not named). Read from SKIPLOCK_NUDGE_FUNCTIONS as
 * `emails,webhooks=app-prod-worker;reports=app-prod-reportsWorker`.
 */
export type NudgeFunctions = Readonly<Record<string, string>>;

/**
 * A nudger that starts the worker function of each queue with an asynchronous Invoke, coalesced
 * per function (see NudgerOptions.coalesceMs). Needs `lambda:InvokeFunction` on those functions.
 */
export function createLambdaNudger(
  functions: NudgeFunctions,
  options: { coalesceMs?: number; logger?: Logger; clock?: Clock } = {},
): Nudger {
  const starters = new Map<string, InvocationStarter>();
  return createNudger({
    ...options,
    workerFor: (queue) => {
      const name = functions[queue] ?? functions['*'];
      if (!name) return undefined;
      let starter = starters.get(name);
      if (!starter) {
        starter = lambdaStarter(name, NUDGE_EVENT);
        starters.set(name, starter);
      }
      return starter;
    },
  });
}
