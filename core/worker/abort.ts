// Its own module so that attempt.ts (which runs the steps) and steps.ts (which aborts them) both
// import it without importing each other's values.

/** Why a job's signal fired. Recorded as the failure class (timeout, invocation_deadline). */
export class JobAbort extends Error {
  readonly reason: 'timeout' | 'invocation_deadline' | 'lease_lost';
  constructor(reason: JobAbort['reason'], message: string) {
    super(message);
    this.name = reason;
    this.reason = reason;
  }
}
