import { createHash } from 'node:crypto';
import { ConfigError } from '../base/errors.js';
import { type Clock, systemClock } from '../core/clock.js';
import { type Logger, silentLogger } from '../core/logger.js';
import { describeError } from '../core/nudge.js';
import { importOptionalPeer } from './optional-peer.js';

/** The event a one-off wake-up (EventBridge Scheduler) sends: any event runs the function; this one says why. */
export const WAKE_EVENT = { source: 'skiplock', reason: 'wake' } as const;

/** Wake-ups were asked for (SKIPLOCK_WAKE_ROLE_ARN), but the AWS SDK's Scheduler client cannot be loaded. */
export class MissingSchedulerClientError extends ConfigError {
  constructor() {
    super(
      'SKIPLOCK_WAKE_ROLE_ARN asks for one-off wake-ups, but @aws-sdk/client-scheduler is not installed: add it to ' +
        'your app (npm install @aws-sdk/client-scheduler; the Lambda Node.js runtime already ships it)',
    );
  }
}

/**
 * Where and how one-off wake-ups are armed: EventBridge Scheduler assumes `roleArn` (which may
 * `lambda:InvokeFunction` the targets) to invoke them; the arming function needs
 * `scheduler:CreateSchedule` and `iam:PassRole` on that role.
 */
export interface LambdaWakeOptions {
  /** SKIPLOCK_WAKE_ROLE_ARN: the role EventBridge Scheduler invokes the targets with. */
  roleArn: string;
  /** SKIPLOCK_WAKE_GROUP: the schedule group. @defaultValue the account's `default` group */
  group?: string | undefined;
  /** The wall time, epoch ms (tests: a simulated day). @defaultValue Date.now */
  now?: () => number;
  /** Bounds each arming on the caller's path (timers only). @defaultValue the system clock */
  clock?: Clock;
  /** @defaultValue silentLogger */
  logger?: Logger;
}

const MINUTE = 60_000;
/**
 * A wake-up is armed at least this far ahead: EventBridge Scheduler fires in the minute it names
 * (anywhere in its 60 s), and the CreateSchedule call must land before that minute begins.
 */
const LEAD_MS = 20_000;
/** Maintenance's cadence while the app is active: one wake per 10-minute slot at most. */
const MAINTENANCE_SLOT_MS = 10 * MINUTE;
/** The longest an arming holds an invocation or an enqueue's answer (the SDK retries once within it). */
const ARM_TIMEOUT_MS = 2_000;

/**
 * The minute a worker due at `dueAt` (epoch ms; null: at once) is woken at: that minute rounded up,
 * but never sooner than the next whole minute LEAD_MS away — what a per-minute tick would give.
 */
export function wakeMinute(dueAt: number | null, now: number): number {
  return Math.ceil(Math.max(dueAt ?? now, now + LEAD_MS) / MINUTE) * MINUTE;
}

/** The next 10-minute slot, at least LEAD_MS away: when an active app's maintenance runs next. */
export function maintenanceSlot(now: number): number {
  return Math.ceil((now + LEAD_MS) / MAINTENANCE_SLOT_MS) * MAINTENANCE_SLOT_MS;
}

const LAMBDA_ARN =
  /^arn:(aws[a-z-]*):lambda:([a-z0-9-]+):(\d{12}):function:([A-Za-z0-9_-]{1,140})(?::([A-Za-z0-9_$-]+))?$/;

/**
 * The schedule's name, by target and minute: `skiplock-<function>-<yyyymmddhhmm>`, at most 64 of
 * Scheduler's characters. Every instance that wants the same target woken in the same minute
 * names the same schedule, so the first one arms it and the others get ConflictException; two
 * minutes never share a name, so an instance never overwrites another's earlier wake.
 */
export function wakeScheduleName(targetArn: string, at: number): string {
  const match = LAMBDA_ARN.exec(targetArn);
  const raw = match ? `${match[4]}${match[5] ? `_${match[5]}` : ''}` : targetArn;
  let target = raw.replace(/[^0-9A-Za-z_.-]/g, '_');
  // 'skiplock-' + target + '-' + 12 digits ≤ 64; a longer target keeps its head and a hash of all of it.
  if (target.length > 42) {
    target = `${target.slice(0, 33)}-${createHash('sha256').update(targetArn).digest('hex').slice(0, 8)}`;
  }
  const minute = new Date(at).toISOString().slice(0, 16).replace(/[-T:]/g, '');
  return `skiplock-${target}-${minute}`;
}

/**
 * A Lambda function's ARN: `nameOrArn` as it is when it is an ARN, else the function of that name
 * in the account and region of `sameAccountAs` (an ARN, e.g. the running function's own).
 */
export function functionArn(nameOrArn: string, sameAccountAs: string): string | undefined {
  if (nameOrArn.startsWith('arn:')) return nameOrArn;
  const match = LAMBDA_ARN.exec(sameAccountAs);
  return match ? `arn:${match[1]}:lambda:${match[2]}:${match[3]}:function:${nameOrArn}` : undefined;
}

/**
 * The ARN of a function of this account, from the wake role's ARN (its partition and account) and
 * the region Lambda runs the caller in (AWS_REGION): how an enqueue names the worker it wakes.
 */
export function functionArnNear(nameOrArn: string, roleArn: string, region: string | undefined): string | undefined {
  if (nameOrArn.startsWith('arn:')) return nameOrArn;
  const role = /^arn:(aws[a-z-]*):iam::(\d{12}):role\//.exec(roleArn);
  if (!role || !region) return undefined;
  return `arn:${role[1]}:lambda:${region}:${role[2]}:function:${nameOrArn}`;
}

type Scheduler = {
  sdk: typeof import('@aws-sdk/client-scheduler');
  client: import('@aws-sdk/client-scheduler').SchedulerClient;
};
/** One client per container (per endpoint: AWS_ENDPOINT_URL_SCHEDULER is read when a client is made). */
const clients = new Map<string, Scheduler>();

/**
 * The AWS SDK's Scheduler client, loaded on the first wake-up: an optional peer dependency (the
 * Lambda Node.js runtime ships it), so an app that never arms a wake-up never loads it.
 */
async function schedulerClient(): Promise<Scheduler> {
  const endpoint = process.env.AWS_ENDPOINT_URL_SCHEDULER ?? '';
  let scheduler = clients.get(endpoint);
  if (!scheduler) {
    const sdk = await importOptionalPeer(
      () => import(/* webpackIgnore: true */ /* turbopackIgnore: true */ '@aws-sdk/client-scheduler'),
      () => new MissingSchedulerClientError(),
    );
    // Bounded like the nudges' Invokes: arming runs on an enqueue's path and at an invocation's end.
    scheduler = {
      sdk,
      client: new sdk.SchedulerClient({
        requestHandler: { connectionTimeout: 1_000, requestTimeout: 1_500 },
        maxAttempts: 2,
      }),
    };
    clients.set(endpoint, scheduler);
  }
  return scheduler;
}

/**
 * One-off wake-ups of Lambda functions with EventBridge Scheduler, for one warm instance: it
 * remembers what it armed (or tried to) so it asks the API once per target and minute, and logs
 * the first failure only (`wake_failed`). Never rejects: a wake-up that is not armed leaves the
 * fixed safety-net schedule to run the function.
 */
export class LambdaWakes {
  readonly #options: LambdaWakeOptions;
  /** Schedule names this instance armed or tried, with their minute (forgotten once past). */
  readonly #armed = new Map<string, number>();
  #failureLogged = false;

  constructor(options: LambdaWakeOptions) {
    this.#options = options;
  }

  /** The wall time, epoch ms. */
  now(): number {
    return (this.#options.now ?? Date.now)();
  }

  /** Wakes `targetArn` with `event` at the whole minute `at` (already rounded). */
  async arm(targetArn: string, at: number, event: object = WAKE_EVENT): Promise<void> {
    const name = wakeScheduleName(targetArn, at);
    const now = this.now();
    for (const [known, minute] of this.#armed) if (minute < now) this.#armed.delete(known);
    if (this.#armed.has(name)) return;
    this.#armed.set(name, at);
    const clock = this.#options.clock ?? systemClock;
    await new Promise<void>((resolve) => {
      const cancel = clock.setTimer(() => {
        this.#failed(name, new Error(`CreateSchedule did not answer within ${ARM_TIMEOUT_MS} ms`));
        resolve();
      }, ARM_TIMEOUT_MS);
      this.#create(name, targetArn, at, event).then(
        () => {
          cancel();
          resolve();
        },
        (err: unknown) => {
          cancel();
          this.#failed(name, err);
          resolve();
        },
      );
    });
  }

  /** Logs that wake-ups are off on this instance and why (once, as a failure would be). */
  unavailable(reason: string): void {
    this.#failed(undefined, new Error(reason));
  }

  async #create(name: string, targetArn: string, at: number, event: object): Promise<void> {
    const { sdk, client } = await schedulerClient();
    try {
      await client.send(
        new sdk.CreateScheduleCommand({
          Name: name,
          GroupName: this.#options.group,
          ScheduleExpression: `at(${new Date(at).toISOString().slice(0, 19)})`,
          ScheduleExpressionTimezone: 'UTC',
          FlexibleTimeWindow: { Mode: 'OFF' },
          ActionAfterCompletion: 'DELETE',
          Target: { Arn: targetArn, RoleArn: this.#options.roleArn, Input: JSON.stringify(event) },
        }),
      );
      this.#options.logger?.debug('wake_armed', { schedule: name, at: new Date(at).toISOString() });
    } catch (err) {
      // Another instance armed this target for this minute: the wake-up is there.
      if ((err as { name?: unknown }).name === 'ConflictException') return;
      throw err;
    }
  }

  #failed(name: string | undefined, err: unknown): void {
    if (this.#failureLogged) return;
    this.#failureLogged = true;
    (this.#options.logger ?? silentLogger).warn('wake_failed', {
      ...(name ? { schedule: name } : {}),
      error: describeError(err),
      hint:
        'one-off wake-ups are not armed on this instance (logged once): the fixed schedule still runs the function ' +
        'every SKIPLOCK_IDLE_RECHECK_MINUTES; the function needs scheduler:CreateSchedule and iam:PassRole on ' +
        'SKIPLOCK_WAKE_ROLE_ARN',
    });
  }
}
