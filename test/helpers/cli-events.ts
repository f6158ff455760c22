// An event and its subscribers for the CLI tests (loaded with --jobs).
import { z } from 'zod';
import { defineEvent, subscribe } from '../../core/events.js';

export const signedUp = defineEvent({
  name: 'user.signed-up',
  schema: z.object({ userId: z.string(), plan: z.string() }),
});

export const jobs = [
  subscribe(signedUp, { kind: 'send-welcome', queue: 'emails' }),
  subscribe(signedUp, { kind: 'crm-sync', where: { plan: 'pro' } }),
];
