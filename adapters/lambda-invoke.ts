import { ConfigError } from '../base/errors.js';
import type { InvocationStarter } from '../base/starter.js';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import { createNudger, describeError, type Nudger } from '../core/nudge.js';
import { functionArnNear, type LambdaWakeOptions, LambdaWakes, wakeMinute } from './lambda-wake.js';
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
 *
 * With `wake` (an idle app: SKIPLOCK_WAKE_ROLE_ARN), every write through an enqueuer that uses this
 * nudger also arms a one-off EventBridge Scheduler wake-up of its queue's worker at the minute the
 * job is due — a due-now write at the next whole minute, the wake-up a per-minute tick would have
 * given, so a job still runs if its nudge is lost or was never asked for (`nudge: true`). Each
 * worker and minute costs one CreateSchedule per instance at most, however many jobs are written.
 */
export function createLambdaNudger(
  functions: NudgeFunctions,
  options: { coalesceMs?: number; logger?: Logger; clock?: Clock; wake?: LambdaWakeOptions } = {},
): Nudger {
  const starters = new Map<string, InvocationStarter>();
  const functionOf = (queue: string) => functions[queue] ?? functions['*'];
  const nudger = createNudger({
    ...options,
    workerFor: (queue) => {
      const name = functionOf(queue);
      if (!name) return undefined;
      let starter = starters.get(name);
      if (!starter) {
        starter = lambdaStarter(name, NUDGE_EVENT);
        starters.set(name, starter);
      }
      return starter;
    },
  });
  const { wake } = options;
  if (!wake) return nudger;
  const wakes = new LambdaWakes({ logger: options.logger, clock: options.clock, ...wake });
  return {
    nudge: (queues) => nudger.nudge(queues),
    async noteDue(due) {
      const now = wakes.now();
      const arms = new Map<string, { target: string; at: number }>();
      for (const { queue, at } of due) {
        const name = functionOf(queue);
        if (!name) continue;
        const target = functionArnNear(name, wake.roleArn, process.env.AWS_REGION);
        if (!target) {
          wakes.unavailable(`no ARN for the worker function ${name}: AWS_REGION is unset`);
          continue;
        }
        const minute = wakeMinute(at?.getTime() ?? null, now);
        const key = `${target} ${minute}`;
        if (!arms.has(key)) arms.set(key, { target, at: minute });
      }
      await Promise.all([...arms.values()].map(({ target, at }) => wakes.arm(target, at)));
    },
  };
}
