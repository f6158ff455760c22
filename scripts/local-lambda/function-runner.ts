/**
 * One function's execution environments, under Lambda's rules: at most `reservedConcurrency`
 * invocations at once (each in its own process), a warm environment reused for the next
 * invocation, a process killed with SIGKILL when it runs past the function's timeout, and
 * asynchronous (`Event`) invocations that find every slot busy waiting in a queue, as in Lambda's
 * event queue, while a synchronous one is refused (the server answers 429).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import type { FunctionErrorPayload, InvokeMessage, RuntimeReply } from './protocol.js';
import type { FunctionSpec } from './template.js';

export type InvocationType = 'RequestResponse' | 'Event';

export type Outcome = { ok: true; result: unknown } | { ok: false; error: FunctionErrorPayload };

export interface InvocationRecord {
  functionName: string;
  requestId: string;
  invocationType: InvocationType;
  event: unknown;
  /** A new environment (process) ran it: import included. */
  coldStart: boolean;
  pid: number;
  /** Epoch ms when it started running (after any wait in the event queue). */
  startedAt: number;
  durationMs: number;
  outcome: Outcome;
}

export interface FunctionStats {
  invocations: number;
  coldStarts: number;
  /** Invocations running now, and the most that ever ran at once. */
  running: number;
  peakRunning: number;
  /** Event invocations waiting for a slot now, and how many ever had to wait. */
  waiting: number;
  queuedEvents: number;
  /** Synchronous invocations refused at the limit (429). */
  throttled: number;
  timedOut: number;
}

export interface RunnerOptions {
  /** The compiled runtime.ts each environment runs. */
  runtimeFile: string;
  /** The folder the function's bundle was unzipped into (LAMBDA_TASK_ROOT). */
  codeDir: string;
  /** The environment's variables, complete (the runner adds nothing). */
  env: Record<string, string>;
  /** A warm environment left idle this long is stopped. */
  idleMs: number;
  onLog(functionName: string, line: string): void;
  onInvocation(record: InvocationRecord): void;
}

interface Environment {
  child: ChildProcess;
  invocations: number;
  alive: boolean;
  idleTimer?: NodeJS.Timeout;
}

export class FunctionRunner {
  readonly #spec: FunctionSpec;
  readonly #options: RunnerOptions;
  readonly #limit: number;
  readonly #idle: Environment[] = [];
  readonly #all = new Set<Environment>();
  readonly #eventQueue: { event: unknown; resolve(outcome: Outcome): void }[] = [];
  readonly #stats: FunctionStats = {
    invocations: 0,
    coldStarts: 0,
    running: 0,
    peakRunning: 0,
    waiting: 0,
    queuedEvents: 0,
    throttled: 0,
    timedOut: 0,
  };
  #closed = false;

  constructor(spec: FunctionSpec, options: RunnerOptions) {
    this.#spec = spec;
    this.#options = options;
    this.#limit = spec.reservedConcurrency ?? Number.POSITIVE_INFINITY;
  }

  get stats(): FunctionStats {
    return { ...this.#stats, waiting: this.#eventQueue.length };
  }

  /** Nothing running and nothing waiting. */
  get quiet(): boolean {
    return this.#stats.running === 0 && this.#eventQueue.length === 0;
  }

  /** A synchronous invocation: undefined when every slot is busy (the caller answers 429). */
  invokeSync(event: unknown): Promise<Outcome> | undefined {
    if (this.#closed || this.#stats.running >= this.#limit) {
      this.#stats.throttled++;
      return undefined;
    }
    return this.#run(event, 'RequestResponse');
  }

  /** An asynchronous invocation: runs now or when a slot frees; resolves when it has run. */
  invokeAsync(event: unknown): Promise<Outcome> {
    if (this.#stats.running < this.#limit && !this.#closed) return this.#run(event, 'Event');
    this.#stats.queuedEvents++;
    return new Promise((resolve) => this.#eventQueue.push({ event, resolve }));
  }

  /** Stops every environment and drops the queued events; resolves once every process is gone. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const queued of this.#eventQueue.splice(0))
      queued.resolve({ ok: false, error: { errorType: 'Emulator.Closed', errorMessage: 'the emulator stopped' } });
    await Promise.all([...this.#all].map((env) => this.#stop(env)));
  }

  #run(event: unknown, invocationType: InvocationType): Promise<Outcome> {
    const stats = this.#stats;
    stats.running++;
    stats.invocations++;
    stats.peakRunning = Math.max(stats.peakRunning, stats.running);
    const env = this.#idle.pop() ?? this.#spawn();
    clearTimeout(env.idleTimer);
    const coldStart = env.invocations === 0;
    if (coldStart) stats.coldStarts++;
    env.invocations++;
    const requestId = randomUUID();
    const startedAt = Date.now();
    const started = performance.now();
    const { child } = env;

    return new Promise<Outcome>((resolve) => {
      let timedOut = false;
      const finish = (outcome: Outcome, reusable: boolean) => {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
        stats.running--;
        if (reusable) this.#park(env);
        const durationMs = performance.now() - started;
        this.#options.onInvocation({
          functionName: this.#spec.name,
          requestId,
          invocationType,
          event,
          coldStart,
          pid: child.pid ?? 0,
          startedAt,
          durationMs,
          outcome,
        });
        resolve(outcome);
        this.#startQueued();
      };
      const onMessage = (reply: RuntimeReply) => {
        if (reply.requestId !== requestId) return;
        if (reply.ok) finish({ ok: true, result: reply.result }, true);
        else finish({ ok: false, error: reply.error }, !reply.exiting);
      };
      // The slot frees only once the process is gone, as Lambda's does after a timeout.
      const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
        if (timedOut) {
          const seconds = (this.#spec.timeoutMs / 1000).toFixed(2);
          finish(
            {
              ok: false,
              error: {
                errorType: 'Sandbox.Timedout',
                errorMessage: `${requestId} Task timed out after ${seconds} seconds`,
              },
            },
            false,
          );
          return;
        }
        const status = signal ? `signal: ${signal}` : `exit status ${code}`;
        finish(
          {
            ok: false,
            error: {
              errorType: 'Runtime.ExitError',
              errorMessage: `RequestId: ${requestId} Error: Runtime exited with error: ${status}`,
            },
          },
          false,
        );
      };
      const timer = setTimeout(() => {
        timedOut = true;
        this.#stats.timedOut++;
        child.kill('SIGKILL');
      }, this.#spec.timeoutMs);
      child.on('message', onMessage);
      child.on('exit', onExit);
      const message: InvokeMessage = { requestId, event, deadline: startedAt + this.#spec.timeoutMs };
      // A send to a process that just died fails here; its exit event then ends the invocation.
      child.send(message, (err) => {
        if (err) child.kill('SIGKILL');
      });
    });
  }

  #startQueued() {
    while (!this.#closed && this.#stats.running < this.#limit) {
      const next = this.#eventQueue.shift();
      if (!next) return;
      void this.#run(next.event, 'Event').then(next.resolve);
    }
  }

  #spawn(): Environment {
    const child = fork(this.#options.runtimeFile, [], {
      cwd: this.#options.codeDir,
      env: this.#options.env,
      execArgv: [], // not the parent's (a TypeScript loader, an inspector): a plain Node, as on Lambda
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const env: Environment = { child, invocations: 0, alive: true };
    this.#all.add(env);
    for (const stream of [child.stdout, child.stderr]) {
      if (stream) createInterface({ input: stream }).on('line', (line) => this.#options.onLog(this.#spec.name, line));
    }
    child.on('error', () => {}); // a failed send or kill; the exit event tells the rest
    child.on('exit', () => {
      env.alive = false;
      clearTimeout(env.idleTimer);
      this.#all.delete(env);
      const i = this.#idle.indexOf(env);
      if (i >= 0) this.#idle.splice(i, 1);
    });
    return env;
  }

  #park(env: Environment) {
    if (!env.alive || this.#closed) return;
    env.idleTimer = setTimeout(() => void this.#stop(env), this.#options.idleMs);
    env.idleTimer.unref();
    this.#idle.push(env);
  }

  #stop(env: Environment): Promise<void> {
    if (!env.alive) return Promise.resolve();
    return new Promise((resolve) => {
      env.child.once('exit', () => resolve());
      env.child.kill('SIGKILL');
    });
  }
}
