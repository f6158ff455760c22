// The worker's public part. The invocation loop, one concern per file: worker.ts (options, createWorker), invocation.ts (the
// loop's states), attempt.ts (one handler run), outcome-buffer.ts, deadline.ts, summary.ts, and
// admission.ts (the cap on running invocations, and fan-out).

export { JobAbort } from './abort.js';
export type { InvocationStarter } from './admission.js';
export type { InvocationInput, InvocationSummary } from './summary.js';
export { createWorker, WORKER_DEFAULTS, type Worker, type WorkerOptions } from './worker.js';
