// Job kinds for the CLI tests (loaded with --jobs): one has sensitive fields; one schedule.
import { z } from 'zod';
import { defineJob } from '../../core/jobs.js';
import { defineSchedule } from '../../core/schedules.js';

const ping = defineJob({
  kind: 'ping',
  payload: z.object({ n: z.number() }),
  rateLimit: { limit: 100, periodMs: 60_000 },
});

export const jobs = [
  defineJob({
    kind: 'charge-card',
    queue: 'payments',
    payload: z.object({
      orderId: z.number(),
      apiKey: z.string(),
      card: z.object({ number: z.string(), last4: z.string() }),
    }),
    sensitive: ['apiKey', 'card.number'],
  }),
  ping,
];

export const schedules = [defineSchedule({ name: 'ping-hourly', cron: '0 * * * *', job: ping, payload: { n: 1 } })];
