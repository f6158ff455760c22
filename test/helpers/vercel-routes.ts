import { z } from 'zod';
import {
  createVercelControl,
  createVercelEnqueue,
  createVercelMaintenance,
  createVercelReplay,
  createVercelWorker,
  type RouteHandler,
} from '../../adapters/vercel.js';
import { defineJob } from '../../core/jobs.js';
import { sendEmail } from './kinds.js';

export const SECRETS = {
  SKIPLOCK_ENQUEUE_TOKEN: 'enqueue-token-0123456789abcdef',
  SKIPLOCK_ADMIN_TOKEN: 'admin-token-0123456789abcdef00',
  CRON_SECRET: 'cron-secret-0123456789abcdef00',
};
export const email = { to: 'ada@example.com', subject: 'Welcome' };
export const tick = defineJob({ kind: 'tick', payload: z.object({}), timeoutMs: 1_000, handler: () => {} });

/** Each Vercel route, the secret that guards it and a request body it accepts. */
export interface RouteSpec {
  name: string;
  secret: keyof typeof SECRETS;
  make: (env: Record<string, string | undefined>) => RouteHandler;
  method: 'GET' | 'POST';
  body?: unknown;
}

export const ROUTES: RouteSpec[] = [
  {
    name: 'enqueue',
    secret: 'SKIPLOCK_ENQUEUE_TOKEN',
    make: (env) => createVercelEnqueue([sendEmail], { env }),
    method: 'POST',
    body: { kind: 'send-email', payload: email },
  },
  {
    name: 'replay',
    secret: 'SKIPLOCK_ADMIN_TOKEN',
    make: (env) => createVercelReplay([sendEmail], { env }),
    method: 'POST',
    body: { all: true, dryRun: true },
  },
  {
    name: 'control',
    secret: 'SKIPLOCK_ADMIN_TOKEN',
    make: (env) => createVercelControl({ env }),
    method: 'POST',
    body: { action: 'list' },
  },
  { name: 'worker cron', secret: 'CRON_SECRET', make: (env) => createVercelWorker([tick], { env }), method: 'GET' },
  { name: 'maintenance cron', secret: 'CRON_SECRET', make: (env) => createVercelMaintenance({ env }), method: 'GET' },
];

/** A request to `route`, JSON for POST routes (`init.body` replaces the route's body). */
export function routeRequest(
  route: RouteSpec,
  authorization?: string,
  init: { body?: string; headers?: Record<string, string> } = {},
): Request {
  const headers: Record<string, string> = {
    ...(route.method === 'POST' ? { 'content-type': 'application/json' } : {}),
    ...init.headers,
  };
  if (authorization !== undefined) headers.authorization = authorization;
  const body = route.method === 'POST' ? (init.body ?? JSON.stringify(route.body)) : undefined;
  return new Request(`https://app.example.com/api/${route.name.replace(' ', '-')}`, {
    method: route.method,
    headers,
    body,
  });
}
