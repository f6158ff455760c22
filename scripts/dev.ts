/**
 * `npm run dev`: the deployable functions on localhost, against DATABASE_URL or an embedded
 * Postgres. Secrets that are not set are generated and printed.
 *
 * - Vercel (the default): serves the api/ routes (POST /api/enqueue, POST /api/replay,
 *   GET /api/worker, …) on PORT (default 3000) and runs the crons of vercel.json on their
 *   schedules (and once at start), in this process; `--crons-once` runs them only at start, so
 *   the routes run only when called (what a test that drives them by hand needs).
 * - Lambda (`npm run dev -- --lambda`): serverless.yml's functions, packaged and run by the local
 *   Lambda emulator, each in its own process (scripts/local-lambda/dev.ts).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { resetSharedRuntime } from '../adapters/runtime.js';
import { cronMatches, parseCron } from '../cli/cron.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { resolveDevDatabase } from './local-postgres.js';

type Route = (request: Request) => Promise<Response>;

const USAGE = `npm run dev [-- options]: the deployable functions on localhost, against DATABASE_URL or an
embedded Postgres. Secrets that are not set (CRON_SECRET, SKIPLOCK_ENQUEUE_TOKEN, SKIPLOCK_ADMIN_TOKEN)
are generated and printed.

  (no option)          Vercel: the api/ routes on PORT (default 3000), vercel.json's crons on their
                       schedules and once at start
  --crons-once         run the crons only at start; routes run only when called
  --lambda             serverless.yml's functions, packaged and run by the local Lambda emulator
                       (HTTP routes on PORT, the Invoke API on LAMBDA_PORT, default 3001); the pg
                       driver only: the emulator's bundles are packaged with driver=pg
  --packaged <dir>     with --lambda: reuse what \`npx serverless package\` already wrote
  --help, -h           this text
`;
if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(USAGE);
  process.exit(0);
}

const database = await resolveDevDatabase();
process.env.DATABASE_URL = database.url;

if (process.argv.includes('--lambda')) {
  const { serveLambda } = await import('./local-lambda/dev.js');
  const stop = await serveLambda(database, process.argv.slice(2));
  const shutdown = async () => {
    await stop();
    await database.stop();
    process.exit(0);
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
} else {
  await serveVercel();
}

/** The Vercel mode: the routes in this process. */
async function serveVercel() {
  // This server sets x-real-ip from the socket itself (toRequest): the console may trust it.
  process.env.SKIPLOCK_CONSOLE_TRUST_PROXY ??= 'true';
  for (const name of ['CRON_SECRET', 'SKIPLOCK_ENQUEUE_TOKEN', 'SKIPLOCK_ADMIN_TOKEN']) {
    if (!process.env[name]) {
      process.env[name] = randomBytes(16).toString('hex');
      console.log(`${name}=${process.env[name]}  (generated for this session)`);
    }
  }
  const db = connect({ connectionString: database.url });
  const migrated = await migrate(db, { schema: process.env.SKIPLOCK_SCHEMA });
  await db.close();
  console.log(
    `database: ${database.embedded ? 'embedded Postgres' : 'DATABASE_URL'}, schema "${migrated.schema}" up to date`,
  );

  const vercel = JSON.parse(readFileSync(new URL('../vercel.json', import.meta.url), 'utf8')) as {
    functions: Record<string, unknown>;
    crons: { path: string; schedule: string }[];
    rewrites?: { source: string; destination: string }[];
  };
  // vercel.json's rewrites (`/admin/:path*` → `/api/admin`): the request keeps the browser's URL.
  const rewrites = (vercel.rewrites ?? []).map((r) => ({
    pattern: new RegExp(`^${r.source.replace(/\/:[A-Za-z]+\*$/, '(?:/.*)?').replace(/:[A-Za-z]+/g, '[^/]+')}$`),
    destination: r.destination,
  }));
  const routeOf = (path: string) => {
    if (routes.has(path)) return routes.get(path);
    const rewrite = rewrites.find((r) => r.pattern.test(path));
    return rewrite ? routes.get(rewrite.destination) : undefined;
  };
  // The routes, imported after the environment is set (the job kinds read it).
  const routes = new Map<string, Record<string, Route>>();
  for (const file of Object.keys(vercel.functions)) {
    const module = (await import(new URL(`../${file}`, import.meta.url).href)) as Record<string, Route>;
    routes.set(`/${file.replace(/\.ts$/, '')}`, module);
  }

  function toRequest(req: IncomingMessage, origin: string): Request {
    const headers = new Headers();
    for (const [key, value] of Object.entries(req.headers)) if (typeof value === 'string') headers.set(key, value);
    // As Vercel does: the client's address comes from the connection, whatever the client sent.
    headers.set('x-real-ip', req.socket.remoteAddress ?? 'unknown');
    headers.delete('x-forwarded-for');
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    return new Request(new URL(req.url ?? '/', origin), {
      method: req.method,
      headers,
      body: hasBody ? (Readable.toWeb(req) as ReadableStream) : undefined,
      duplex: 'half',
    } as RequestInit);
  }

  const server = createServer(async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const module = routeOf(path);
    const handler = module?.[req.method ?? 'GET'];
    if (!handler) {
      res.writeHead(module ? 405 : 404, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: { code: module ? 'method_not_allowed' : 'not_found', message: `${req.method} ${path}` },
        }),
      );
      return;
    }
    const response = await handler(toRequest(req, `http://${req.headers.host ?? 'localhost'}`));
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  await new Promise<void>((resolve) => server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  console.log(`listening on ${origin}  (routes: ${[...routes.keys()].join(', ')})`);
  console.log(`console: ${origin}/admin  (log in with SKIPLOCK_ADMIN_TOKEN)`);

  const crons = vercel.crons.map((c) => ({ ...c, fields: parseCron(c.schedule) }));
  const runCron = async (cron: { path: string }) => {
    const route = routes.get(cron.path)?.GET;
    if (!route) return;
    const response = await route(
      new Request(`${origin}${cron.path}`, { headers: { authorization: `Bearer ${process.env.CRON_SECRET}` } }),
    );
    console.log(`cron ${cron.path} → ${response.status} ${await response.text()}`);
  };
  const tick = async (now: Date) => {
    for (const cron of crons) if (cronMatches(cron.fields, now)) await runCron(cron).catch(() => {});
  };
  const once = process.argv.includes('--crons-once');
  console.log(
    `crons: ${crons.map((c) => `${c.path} "${c.schedule}"`).join(', ')}; running each once now${once ? ' (--crons-once: not again)' : ''}`,
  );
  for (const cron of crons) await runCron(cron).catch(() => {});
  // Fire on every minute boundary, like the platform's scheduler.
  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    if (once) return;
    timer = setTimeout(
      async () => {
        await tick(new Date());
        schedule();
      },
      60_000 - (Date.now() % 60_000) + 50,
    );
  };
  schedule();

  const shutdown = async () => {
    clearTimeout(timer);
    server.closeAllConnections();
    server.close();
    await resetSharedRuntime();
    await database.stop();
    process.exit(0);
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}
