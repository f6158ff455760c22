// POST /api/control with Authorization: Bearer $SKIPLOCK_ADMIN_TOKEN:
// { "action": "pause" | "resume", "queue": "webhooks" } (or "kind"), or { "action": "list" }.
import { createVercelControl } from 'skiplock/vercel';
import { idleHints } from '../../../functions/idle-hints';

export const maxDuration = 10;
export const POST = createVercelControl({ idleHints });
