import { createHash, timingSafeEqual } from 'node:crypto';
import { InvalidOptionsError } from '../../base/errors.js';
import { type JobDefinition, JobRegistry } from '../../core/jobs.js';
import { type FunctionRuntime, publicMessage, sharedRuntime } from '../runtime.js';
import { errorResponse, HttpError, MIN_SECRET_LENGTH } from '../web/http.js';
import { handleAction } from './actions.js';
import type { ConsoleContext } from './context.js';
import { eventPage, eventsPage } from './event-pages.js';
import { html, type Page } from './html.js';
import {
  type ConsoleRequest,
  type ConsoleResponse,
  clearedSessionCookie,
  page,
  redirect,
  SESSION_COOKIE,
  sessionCookie,
} from './http.js';
import { dlqPage, jobPage, jobsPage } from './job-pages.js';
import { controlsPage, overviewPage } from './pages.js';
import { schedulesPage } from './schedule-pages.js';
import {
  clientKey,
  closeConsoleSession,
  countConsoleLoginAttempt,
  forgetConsoleLoginAttemptsOf,
  openConsoleSession,
  readConsoleSession,
  tokenId,
} from './sessions.js';

// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
type Kinds = readonly JobDefinition<any, any>[];
type Env = Record<string, string | undefined>;

export interface ConsoleOptions {
  /** @defaultValue process.env */
  env?: Env;
  /** Where the console is served. @defaultValue '/admin' */
  basePath?: string;
  /**
   * The path browsers see before `basePath`, when a gateway in front of the function strips it
   * (Supabase's `/functions/v1`): the console's links, forms and redirects carry it. @defaultValue ''
   */
  gatewayPath?: string;
  /** Every session read-only, whatever token opened it. @defaultValue SKIPLOCK_CONSOLE_READ_ONLY, else false */
  readOnly?: boolean;
  /** The time sessions, login blocks and charts are measured against (tests). @defaultValue the database's clock */
  now?: () => Date;
  /**
   * The origin browsers show for the console (`https://ops.example.com`) when a proxy in front of
   * the function (CloudFront) changes the Host header and does not say the original: a POST whose
   * Origin names another host is refused. @defaultValue the request's Host header (its URL's host
   * without one), or X-Forwarded-Host where proxy headers are trusted
   */
  origin?: string;
  /**
   * Whether the client address may be read from `x-real-ip` / `x-forwarded-for` (the login throttle
   * counts per address), and a form's Origin may name `x-forwarded-host`: only when a proxy you
   * control sets them. Otherwise every client shares one count, which never keeps the right token
   * out. @defaultValue true on Vercel (VERCEL=1, whose edge sets them) or with
   * SKIPLOCK_CONSOLE_TRUST_PROXY=true, else false
   */
  trustProxyHeaders?: boolean;
}

/**
 * Login attempts allowed per window from one client address (the next is refused until the window
 * ends), and failed logins from every client together past which each failure is logged as
 * `console_login_flood` — a flood from many addresses is logged, it never locks the admin out.
 */
export const CONSOLE_LOGIN_THROTTLE = { perClient: 5, overall: 50, windowMs: 15 * 60_000 } as const;

/** The client address when the platform does not give one the console can trust: one shared count. */
export const UNKNOWN_CLIENT = 'unknown';

const MAX_FORM_BYTES = 256 * 1024;
const NAME = /^[\p{L}\p{N} ._@'-]{1,64}$/u;

const equalSecret = (a: string, b: string) =>
  timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());

function errorPage(err: unknown, base: string, session?: ConsoleContext['session']): ConsoleResponse {
  const { status, body } = errorResponse(err);
  const message = (body.error as { message: string }).message;
  const title = status >= 500 ? 'Something went wrong' : 'That did not work';
  return page(
    status,
    {
      title,
      body: html`<h1>${title}</h1><div class="notice bad" role="alert">${message}</div><p>Nothing was changed by this request. <a href="${base}/">Back to the overview</a></p>`,
    },
    { base, session },
  );
}

async function readForm(request: ConsoleRequest): Promise<URLSearchParams> {
  const type = request.header('content-type') ?? '';
  if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(type)) {
    throw new HttpError(415, 'unsupported_content_type', 'send the form as application/x-www-form-urlencoded');
  }
  return new URLSearchParams(await request.readBody(MAX_FORM_BYTES));
}

/**
 * A POST must come from a page of this console: an Origin header, when sent, names the host the
 * browser sent the request to (a page elsewhere cannot set Host or X-Forwarded-Host on a form), or
 * the `origin` option's host when given. Hosts compare as URLs do: case and default port aside.
 */
function sameOrigin(request: ConsoleRequest, expected: string | undefined): boolean {
  const origin = request.header('origin');
  if (origin === undefined) return true;
  try {
    const from = new URL(origin);
    if (from.protocol !== 'https:' && from.protocol !== 'http:') return false;
    const hostOf = (host: string) => new URL(`${from.protocol}//${host}`).host;
    const hosts = expected ? [new URL(expected).host] : request.hosts;
    return hosts.some((host) => {
      try {
        return hostOf(host) === from.host;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

/** Where to go after logging in: a path of the console only, in printable ASCII (a Location header). */
function nextPath(base: string, next: string | null): string {
  if (next && (next === base || next.startsWith(`${base}/`)) && /^[\x21-\x7e]+$/.test(next) && !/\\|\/\//.test(next)) {
    return next;
  }
  return `${base}/`;
}

function loginPage(base: string, status: number, next: string, problem?: string): ConsoleResponse {
  const content: Page = {
    title: 'Log in',
    body: html`<div class="login"><h1>skiplock console</h1>
      ${problem ? html`<div class="notice bad" role="alert">${problem}</div>` : ''}
      <form method="post" action="${base}/login"><input type="hidden" name="next" value="${next}">
      <label>Admin token<input type="password" name="token" autocomplete="current-password" required></label>
      <label>Your name (kept with every change you make)<input name="name" autocomplete="username" maxlength="64" placeholder="admin"></label>
      <button class="primary">Log in</button></form></div>`,
  };
  return page(status, content, { base });
}

/**
 * The operator console: server-rendered pages (overview, jobs, DLQ, a job, controls) and their
 * actions, behind a login with SKIPLOCK_ADMIN_TOKEN (or SKIPLOCK_CONSOLE_VIEWER_TOKEN, read-only)
 * that opens a session cookie. Platform-neutral: the web core's consoleRoute (adapters/web/routes.ts)
 * serves it from a Web Request, on every platform.
 */
export function createConsole(
  jobs: Kinds,
  options: ConsoleOptions = {},
  /** The environment of a request: the platform's. */
  envOf: () => Env = () => options.env ?? process.env,
) {
  const registry = new JobRegistry(jobs);
  // `route`: the path the function is asked for; `base`: where browsers see it (links, forms, redirects).
  const route = `/${(options.basePath ?? '/admin').replace(/^\/+|\/+$/g, '')}`.replace(/^\/$/, '');
  const gateway = (options.gatewayPath ?? '').replace(/\/+$/, '');
  const base = `${gateway}${route}`;
  return async (request: ConsoleRequest): Promise<ConsoleResponse> => {
    try {
      return await serve(request);
    } catch (err) {
      return errorPage(err, base);
    }
  };

  async function serve(request: ConsoleRequest): Promise<ConsoleResponse> {
    const { pathname } = request.url;
    if (pathname !== route && !pathname.startsWith(`${route}/`)) throw new HttpError(404, 'not_found', 'no such page');
    const path = pathname.slice(route.length) || '/';
    const env = envOf();
    const adminToken = env.SKIPLOCK_ADMIN_TOKEN ?? '';
    if (adminToken.length < MIN_SECRET_LENGTH) {
      throw new HttpError(
        503,
        'console_disabled',
        `the console is off until SKIPLOCK_ADMIN_TOKEN is set (at least ${MIN_SECRET_LENGTH} characters)`,
      );
    }
    const viewerToken = env.SKIPLOCK_CONSOLE_VIEWER_TOKEN ?? '';
    const tokens = [
      { token: adminToken, readOnly: false },
      ...(viewerToken.length >= MIN_SECRET_LENGTH ? [{ token: viewerToken, readOnly: true }] : []),
    ];
    const runtime = sharedRuntime(env);
    const settings = runtime.settings.require('console');
    const schema = settings.schema;
    const now = options.now;
    const method = request.method.toUpperCase();
    if (method === 'POST' && !sameOrigin(request, options.origin)) {
      runtime.logger.warn('console_action_refused', { reason: 'cross_origin', path, client: request.client });
      throw new HttpError(403, 'cross_origin', 'this form was not sent from the console; nothing was changed');
    }

    if (path === '/login') {
      if (method === 'GET') return loginPage(base, 200, nextPath(base, request.url.searchParams.get('next')));
      if (method !== 'POST') throw new HttpError(405, 'method_not_allowed', 'use GET or POST');
      return login(request, runtime, schema, tokens, settings.consoleSessionMinutes, now);
    }

    const secret = request.cookie(SESSION_COOKIE);
    const issuers = tokens.map((t) => tokenId(t.token));
    const session = secret
      ? await runtime.withDb((db) => readConsoleSession(db, secret, issuers, { schema, now: now?.() }))
      : null;
    if (!session) {
      if (method === 'GET') {
        return redirect(`${base}/login?next=${encodeURIComponent(gateway + pathname + request.url.search)}`);
      }
      const expired = page(
        401,
        {
          title: 'Session expired',
          body: html`<h1>Your session has ended</h1><div class="notice bad" role="alert">Log in again: nothing was changed.</div><p><a href="${base}/login">Log in</a></p>`,
        },
        { base },
        secret ? [clearedSessionCookie()] : [],
      );
      return expired;
    }
    const readOnly = session.readOnly || (options.readOnly ?? settings.consoleReadOnly);
    const ctx: ConsoleContext = {
      base,
      session: { who: session.who, readOnly, csrf: session.csrf },
      by: `console:${session.who}`,
      client: request.client,
      runtime,
      schema,
      registry,
      now: now?.(),
    };
    const chrome = { base, session: ctx.session };
    try {
      if (method === 'POST') return await post(request, ctx, secret as string);
      if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, 'method_not_allowed', 'use GET or POST');
      const content = await show(path, request.url, ctx);
      if (!content) throw new HttpError(404, 'not_found', 'no such page');
      return page(200, content, chrome);
    } catch (err) {
      return errorPage(err, base, ctx.session);
    }
  }

  async function post(request: ConsoleRequest, ctx: ConsoleContext, secret: string): Promise<ConsoleResponse> {
    const form = await readForm(request);
    const presented = form.get('csrf') ?? '';
    if (!equalSecret(presented, ctx.session.csrf)) {
      ctx.runtime.logger.warn('console_csrf_refused', { by: ctx.by, client: ctx.client });
      throw new HttpError(403, 'csrf', 'this form has expired or did not come from the console; nothing was changed');
    }
    const path = request.url.pathname.slice(route.length);
    if (path === '/logout') {
      await ctx.runtime.withDb((db) => closeConsoleSession(db, secret, { schema: ctx.schema }));
      ctx.runtime.logger.info('console_logout', { by: ctx.by, client: ctx.client });
      return redirect(`${base}/login`, [clearedSessionCookie()]);
    }
    if (path !== '/actions') throw new HttpError(404, 'not_found', 'no such page');
    const action = (form.get('action') ?? '').slice(0, 40);
    const refused = (reason: string, error?: string) =>
      ctx.runtime.logger.warn('console_action_refused', {
        reason,
        action,
        by: ctx.by,
        client: ctx.client,
        ...(error ? { error } : {}),
      });
    if (ctx.session.readOnly) {
      refused('read_only');
      throw new HttpError(403, 'read_only', 'this console session is read-only; nothing was changed');
    }
    try {
      return page(200, await handleAction(ctx, form), { base, session: ctx.session });
    } catch (err) {
      refused('failed', publicMessage(err));
      throw err;
    }
  }

  async function show(path: string, url: URL, ctx: ConsoleContext): Promise<Page | null> {
    if (path === '/') return overviewPage(ctx, url);
    if (path === '/jobs') return jobsPage(ctx, url);
    if (path === '/dlq') return dlqPage(ctx, url);
    if (path === '/flow') return controlsPage(ctx);
    if (path === '/events') return eventsPage(ctx, url);
    const event = /^\/events\/([1-9][0-9]{0,18})$/.exec(path);
    if (event) return eventPage(ctx, event[1] as string);
    if (path === '/schedules') return schedulesPage(ctx, url);
    const job = /^\/jobs\/([1-9][0-9]{0,18})$/.exec(path);
    if (job) return jobPage(ctx, job[1] as string);
    return null;
  }

  async function login(
    request: ConsoleRequest,
    runtime: FunctionRuntime,
    schema: string,
    tokens: { token: string; readOnly: boolean }[],
    sessionMinutes: number,
    now: (() => Date) | undefined,
  ): Promise<ConsoleResponse> {
    const form = await readForm(request);
    const next = nextPath(base, form.get('next'));
    const client = request.client;
    const key = clientKey(client);
    const at = { schema, now: now?.() };
    // Counted before the token is compared: a burst of guesses queues on the client's count.
    const { blockedUntil, overallFailures } = await runtime.withDb((db) =>
      countConsoleLoginAttempt(db, key, CONSOLE_LOGIN_THROTTLE, at),
    );
    const presented = form.get('token') ?? '';
    const match = tokens.find((t) => equalSecret(presented, t.token));
    // A known address is blocked outright. Without one every client shares the count, so strangers'
    // guesses would lock the admin out: there the right token still gets in, a wrong one is refused.
    if (blockedUntil && (client !== UNKNOWN_CLIENT || !match)) {
      runtime.logger.warn('console_login_blocked', { client, until: blockedUntil.toISOString() });
      return loginPage(base, 429, next, `Too many failed logins. Try again after ${blockedUntil.toISOString()}.`);
    }
    if (!match) {
      runtime.logger.warn('console_login_failed', { client });
      if (overallFailures > CONSOLE_LOGIN_THROTTLE.overall) {
        runtime.logger.error('console_login_flood', {
          failures: overallFailures,
          windowMs: CONSOLE_LOGIN_THROTTLE.windowMs,
        });
      }
      return loginPage(base, 401, next, 'That token is not right.');
    }
    const name = (form.get('name') ?? '').trim() || 'admin';
    if (!NAME.test(name)) {
      throw new InvalidOptionsError("a name is letters, digits, spaces and . _ @ ' - (at most 64)");
    }
    const ttlMs = sessionMinutes * 60_000;
    const { secret } = await runtime.withDb(async (db) => {
      await forgetConsoleLoginAttemptsOf(db, key, at);
      return openConsoleSession(
        db,
        { who: name, readOnly: match.readOnly, tokenId: tokenId(match.token), client, ttlMs },
        at,
      );
    });
    runtime.logger.info('console_login', { who: name, client, readOnly: match.readOnly });
    return redirect(next, [sessionCookie(secret, ttlMs / 1000)]);
  }
}

export type { ConsoleRequest, ConsoleResponse } from './http.js';
