// POST /api/signal?token=… sends one signal, the JSON body as its payload, to the job waiting on the
// token's key. The token (createSignalToken, signed with SKIPLOCK_SIGNAL_SECRET) is the credential:
// it expires and works once. A signal that woke a job starts the worker route of its queue
// (SKIPLOCK_NUDGE_ROUTES), the request kept alive after the response with Next's `after`.
import { after } from 'next/server';
import { createVercelSignal } from 'skiplock/vercel';
import { idleHints } from '../../../functions/idle-hints';

export const maxDuration = 10;
export const POST = createVercelSignal({ waitUntil: after, idleHints });
