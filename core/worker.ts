// The invocation loop lives in core/worker/: worker.ts (options, createWorker), invocation.ts (the
// loop's states), attempt.ts (one handler run), outcome-buffer.ts, deadline.ts, summary.ts, and
// admission.ts (the cap on running invocations, and fan-out).

export { JobAbort } from './worker/abort.js';
export type { InvocationStarter } from './worker/admission.js';
export type { InvocationInput, InvocationSummary } from './worker/summary.js';
export { createWorker, WORKER_DEFAULTS, type Worker, type WorkerOptions } from './worker/worker.js';
