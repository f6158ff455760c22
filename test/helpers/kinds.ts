import { z } from 'zod';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';

export const sendEmail = defineJob({
  kind: 'send-email',
  queue: 'emails',
  payload: z.object({ to: z.email(), subject: z.string().min(1), body: z.string().default('') }),
  maxAttempts: 3,
  timeoutMs: 2_000,
});

export const syncProfile = defineJob({
  kind: 'sync-profile',
  payload: z.object({ userId: z.number().int(), name: z.string() }),
});

export const blob = defineJob({
  kind: 'blob',
  payload: z.object({ data: z.string() }),
});

export function enqueuerFor(schema: string, maxPayloadBytes?: number) {
  return createEnqueuer({ schema, maxPayloadBytes });
}

/** A kind on queue `pings` whose handler records each payload's `n` in `ran` (the nudge tests). */
export function pingKind() {
  const ran: number[] = [];
  const ping = defineJob({
    kind: 'ping',
    queue: 'pings',
    payload: z.object({ n: z.number() }),
    timeoutMs: 1_000,
    handler: (p) => {
      ran.push(p.n);
    },
  });
  return { ping, ran };
}
