import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { z } from 'zod';
import { createVercelConsole } from '../../adapters/vercel.js';
import { defineJob, type JobDefinition } from '../../core/jobs.js';
import { databaseUrl, testDriver } from './db.js';

/** A kind with a declared sensitive path, to see the console mask it. */
export const charge = defineJob({
  kind: 'charge-card',
  queue: 'billing',
  payload: z.object({
    customer: z.string(),
    card: z.object({ number: z.string(), last4: z.string() }),
    apiKey: z.string(),
  }),
  sensitive: ['card.number'],
  maxAttempts: 2,
});

export const COOKIE = '__Host-skiplock-console';

/**
 * A client of a console route that keeps its session cookie, as a browser would: `get` and `post`
 * (form fields) on paths of the origin, `csrf` read from the last page.
 */
export class ConsoleClient {
  cookie: string | undefined;
  lastHtml = '';
  constructor(
    private readonly handler: (request: Request) => Promise<Response>,
    private readonly origin = 'https://app.example.com',
    private readonly client = '203.0.113.7',
  ) {}

  async request(
    method: string,
    path: string,
    form?: Record<string, string | string[]>,
    headers: Record<string, string> = {},
  ) {
    const body = new URLSearchParams();
    for (const [k, v] of Object.entries(form ?? {})) for (const item of [v].flat()) body.append(k, item);
    const response = await this.handler(
      new Request(`${this.origin}${path}`, {
        method,
        headers: {
          'x-real-ip': this.client,
          ...(form ? { 'content-type': 'application/x-www-form-urlencoded', origin: this.origin } : {}),
          ...(this.cookie ? { cookie: `${COOKIE}=${this.cookie}` } : {}),
          ...headers,
        },
        body: form ? body.toString() : undefined,
      }),
    );
    for (const set of response.headers.getSetCookie()) {
      const match = new RegExp(`^${COOKIE}=([^;]*)`).exec(set);
      if (match) this.cookie = match[1] || undefined;
    }
    this.lastHtml = await response.text();
    return { status: response.status, headers: response.headers, html: this.lastHtml };
  }

  get(path: string) {
    return this.request('GET', path);
  }

  post(path: string, form: Record<string, string | string[]>, headers?: Record<string, string>) {
    return this.request('POST', path, form, headers);
  }

  /** The CSRF token the last page's forms carry. */
  get csrf(): string {
    const match = /name="csrf" value="([^"]+)"/.exec(this.lastHtml);
    if (!match) throw new Error('no CSRF field on the last page');
    return match[1] as string;
  }

  async login(token: string, name = 'ada') {
    const response = await this.post('/admin/login', { token, name, next: '/admin/' });
    if (response.status !== 303) throw new Error(`login answered ${response.status}`);
    await this.get('/admin/');
    return response;
  }
}

/** Serves a Web route on 127.0.0.1 (the way the dev server does, x-real-ip from the socket); returns its origin. */
export async function serveRoute(
  handler: (request: Request) => Promise<Response>,
): Promise<{ origin: string; server: Server }> {
  const server = createServer(async (req, res) => {
    const headers = new Headers();
    for (const [key, value] of Object.entries(req.headers)) if (typeof value === 'string') headers.set(key, value);
    headers.set('x-real-ip', req.socket.remoteAddress ?? 'unknown');
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    const response = await handler(
      new Request(new URL(req.url ?? '/', `http://${req.headers.host}`), {
        method: req.method,
        headers,
        body: hasBody ? (Readable.toWeb(req) as ReadableStream) : undefined,
        duplex: 'half',
      } as RequestInit),
    );
    const out: Record<string, string | string[]> = Object.fromEntries(response.headers);
    const cookies = response.headers.getSetCookie();
    if (cookies.length > 0) out['set-cookie'] = cookies;
    res.writeHead(response.status, out);
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/**
 * A console client of the Vercel console route for `jobs`, on the run's database and `schema`
 * through the driver under test, logged in with `adminToken` when it calls `login`; its clock fixed
 * at `now` (never slept on).
 */
export function vercelConsoleClient(
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
  jobs: readonly JobDefinition<any, any>[],
  schema: string,
  adminToken: string,
  now = new Date(),
): ConsoleClient {
  return new ConsoleClient(
    createVercelConsole(jobs, {
      env: {
        DATABASE_URL: databaseUrl(),
        SKIPLOCK_DRIVER: testDriver(),
        SKIPLOCK_SCHEMA: schema,
        SKIPLOCK_LOG_LEVEL: 'error',
        SKIPLOCK_ADMIN_TOKEN: adminToken,
        VERCEL: '1',
      },
      now: () => now,
    }),
  );
}
