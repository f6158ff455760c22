// The Vercel starter's edges, without a database: what it sends, what it refuses to send, and
// that outside Vercel (no request context, where waitUntil does nothing) a start neither blocks
// its caller nor is dropped.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createVercelWorker, resetSharedRuntime } from '../../adapters/vercel.js';
import {
  createVercelNudger,
  ownOrigin,
  routeUrl,
  START_HEADER,
  vercelRouteStarter,
} from '../../adapters/vercel-start.js';
import { defineJob } from '../../core/jobs.js';
import type { Logger } from '../../core/logger.js';
import { captureStdout } from '../helpers/stdout.js';

const SECRET = 'cron-secret-0123456789abcdef00';
const servers: { close(): void; closeAllConnections(): void }[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
  }
  await resetSharedRuntime();
});

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A logger that hands each warning to `seen`. */
function warnings() {
  const lines: Record<string, unknown>[] = [];
  let notify: (() => void) | undefined;
  const logger: Logger = {
    debug() {},
    info() {},
    error() {},
    warn(msg, fields) {
      lines.push({ msg, ...fields });
      notify?.();
    },
  };
  const next = () =>
    new Promise<void>((resolve) => {
      notify = resolve;
    });
  return { logger, lines, next };
}

describe('vercelRouteStarter', () => {
  it('outside Vercel a start returns before the route answers, and the request still arrives with the bearer and the start header', async () => {
    let answer!: () => void;
    let arrive!: (req: IncomingMessage) => void;
    const arrived = new Promise<IncomingMessage>((resolve) => {
      arrive = resolve;
    });
    const origin = await listen((req, res) => {
      answer = () => res.writeHead(202).end();
      arrive(req);
    });
    const url = new URL('/api/worker?from=test', origin);
    // The route holds its answer: a start() that waited for it would never return.
    await vercelRouteStarter(url, { secret: SECRET, reason: 'nudge' }).start(1);
    const req = await arrived;
    expect(req.method).toBe('GET');
    expect(req.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(req.headers[START_HEADER]).toBe('nudge');
    expect(req.url).toBe('/api/worker?from=test');
    answer();
  });

  it.each([
    ['no secret', undefined, 'http://127.0.0.1:9/api/worker', /CRON_SECRET must be set/],
    ['a secret shorter than 16 characters', 'short', 'http://127.0.0.1:9/api/worker', /CRON_SECRET must be set/],
    ['plain http to a host that is not this machine', SECRET, 'http://app.example.com/api/worker', /use https/],
  ])('refuses to start with %s, sending nothing and naming no secret', async (_name, secret, target, message) => {
    const starter = vercelRouteStarter(new URL(target), { secret, reason: 'fan-out' });
    const error = await starter.start(1).then(
      () => undefined,
      (err: Error) => err.message,
    );
    expect(error).toMatch(message);
    expect(error).not.toContain(SECRET);
  });

  it('does not follow a redirect (the secret stays with the worker route) and logs the status', async () => {
    let elsewhere = 0;
    const other = await listen((_req, res) => {
      elsewhere++;
      res.writeHead(202).end();
    });
    const origin = await listen((_req, res) => res.writeHead(307, { location: `${other}/steal` }).end());
    const { logger, lines, next } = warnings();
    const logged = next();
    await vercelRouteStarter(new URL('/api/worker', origin), { secret: SECRET, reason: 'fan-out', logger }).start(1);
    await logged;
    expect(lines).toEqual([{ msg: 'fan_out_failed', route: `${origin}/api/worker`, status: 307, code: undefined }]);
    expect(elsewhere).toBe(0);
  });

  it('a route that does not answer within acceptTimeoutMs is let go and logged, without blocking the caller', async () => {
    const origin = await listen(() => {}); // never answers
    const { logger, lines, next } = warnings();
    const logged = next();
    const starter = vercelRouteStarter(new URL('/api/worker', origin), {
      secret: SECRET,
      reason: 'nudge',
      logger,
      acceptTimeoutMs: 50,
    });
    await starter.start(2);
    await logged;
    expect(lines[0]).toMatchObject({ msg: 'nudge_failed', route: `${origin}/api/worker`, error: 'TimeoutError' });
    expect(JSON.stringify(lines)).not.toContain(SECRET);
  });

  it("hands each start's request to a supplied waitUntil (Next's `after`) instead of @vercel/functions'", async () => {
    let arrivals = 0;
    const origin = await listen((_req, res) => {
      arrivals++;
      res.writeHead(202).end();
    });
    const kept: Promise<unknown>[] = [];
    const starter = vercelRouteStarter(new URL('/api/worker', origin), {
      secret: SECRET,
      reason: 'nudge',
      waitUntil: (promise) => kept.push(promise),
    });
    await starter.start(3);
    expect(kept).toHaveLength(3);
    await Promise.all(kept); // each settles when its route accepted
    expect(arrivals).toBe(3);
  });

  it('a path is requested on the given origin; an absolute URL as it is', () => {
    expect(routeUrl('/api/worker', 'https://my-app.example.com').href).toBe('https://my-app.example.com/api/worker');
    expect(routeUrl('https://other.example.com/api/reports-worker', 'https://my-app.example.com').href).toBe(
      'https://other.example.com/api/reports-worker',
    );
  });
});

describe('the Vercel worker route, for a started request', () => {
  const noop = defineJob({ kind: 'noop', payload: z.object({}), handler: () => {} });
  const start = (secret: string) =>
    new Request('https://app.example.com/api/worker', {
      headers: { authorization: `Bearer ${secret}`, [START_HEADER]: 'fan-out' },
    });

  it('refuses a wrong bearer with 401 before anything else', async () => {
    const route = createVercelWorker([noop], { env: { CRON_SECRET: SECRET } });
    const response = await route(start('not-the-cron-secret-000000000'));
    expect(response.status).toBe(401);
    expect(await response.text()).not.toContain(SECRET);
  });

  it('a bad SKIPLOCK_BASE_URL disables the worker, named in the answer, before any run is accepted', async () => {
    const env = {
      CRON_SECRET: SECRET,
      DATABASE_URL: 'postgres://u:s3cret@127.0.0.1:9/app',
      SKIPLOCK_BASE_URL: 'ftp://x',
    };
    const response = await createVercelWorker([noop], { env })(start(SECRET));
    expect(response.status).toBe(500);
    const text = await response.text();
    expect(text).toMatch(/SKIPLOCK_BASE_URL must be an absolute http\(s\) URL/);
    expect(text).not.toContain('s3cret');
  });
});

describe('createVercelNudger without an origin', () => {
  it("defaults to SKIPLOCK_BASE_URL, else production's domain, else the deployment's own URL, else the local server", () => {
    expect(ownOrigin({ SKIPLOCK_BASE_URL: 'https://app.example.com', VERCEL_URL: 'p.vercel.app' })).toBe(
      'https://app.example.com',
    );
    expect(ownOrigin({ VERCEL_URL: 'my-app-git-x.vercel.app' })).toBe('https://my-app-git-x.vercel.app');
    // In production, the production domain: Deployment Protection covers the deployment's own URL.
    const production = { VERCEL_ENV: 'production', VERCEL_URL: 'my-app-abc.vercel.app' };
    expect(ownOrigin({ ...production, VERCEL_PROJECT_PRODUCTION_URL: 'app.example.com' })).toBe(
      'https://app.example.com',
    );
    expect(ownOrigin(production)).toBe('https://my-app-abc.vercel.app');
    expect(
      ownOrigin({
        VERCEL_ENV: 'preview',
        VERCEL_URL: 'p.vercel.app',
        VERCEL_PROJECT_PRODUCTION_URL: 'app.example.com',
      }),
    ).toBe('https://p.vercel.app');
    expect(ownOrigin({ PORT: '3100' })).toBe('http://localhost:3100');
    expect(ownOrigin({})).toBe('http://localhost:3000');
  });

  it('under next start (no VERCEL_URL) nudges the local server, and says a refused start on stdout by default', async () => {
    const seen: { path: string | undefined; auth: string | undefined }[] = [];
    const origin = await listen((req, res) => {
      seen.push({ path: req.url, auth: req.headers.authorization });
      res.writeHead(seen.length === 1 ? 202 : 401, { 'content-type': 'application/json' }).end('{}');
    });
    const saved = { PORT: process.env.PORT, VERCEL_URL: process.env.VERCEL_URL, BASE: process.env.SKIPLOCK_BASE_URL };
    process.env.PORT = new URL(origin).port;
    delete process.env.VERCEL_URL;
    delete process.env.SKIPLOCK_BASE_URL;
    try {
      const kept: Promise<unknown>[] = [];
      const nudger = createVercelNudger(
        { '*': '/api/worker' },
        { secret: SECRET, coalesceMs: 0, idleHints: false, waitUntil: (p) => void kept.push(p) },
      );
      const { lines } = await captureStdout(async () => {
        await nudger.nudge(['emails']);
        await Promise.all(kept.splice(0));
        await nudger.nudge(['emails']);
        await Promise.all(kept.splice(0));
      });
      expect(seen).toEqual([
        { path: '/api/worker', auth: `Bearer ${SECRET}` },
        { path: '/api/worker', auth: `Bearer ${SECRET}` },
      ]);
      // The second start was refused: one warning line, with the route and the status, never the secret.
      const warned = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(warned).toEqual([
        expect.objectContaining({
          level: 'warn',
          msg: 'nudge_failed',
          route: `http://localhost:${process.env.PORT}/api/worker`,
          status: 401,
        }),
      ]);
      expect(lines.join('')).not.toContain(SECRET);
    } finally {
      for (const [key, value] of [
        ['PORT', saved.PORT],
        ['VERCEL_URL', saved.VERCEL_URL],
        ['SKIPLOCK_BASE_URL', saved.BASE],
      ] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });
});
