/**
 * Starts more invocations of a worker: the platform's own scaling, e.g. an asynchronous Lambda
 * Invoke of the worker function, or a request to the worker route on Vercel. Starting is only
 * ever a hint: an invocation that finds every slot held returns at once, and the scheduler's tick
 * stays the safety net, so a start that is lost or doubled costs latency, never a job. Shared by the
 * worker (fan-out) and the nudgers (core/nudge.ts), which therefore need not import each other.
 */
export interface InvocationStarter {
  start(count: number): Promise<void>;
}
