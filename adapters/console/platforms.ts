import { readWebBody, tooLarge } from '../http.js';
import { type ConsoleRequest, type ConsoleResponse, cookieFrom } from './http.js';
import { type ConsoleOptions, createConsole, UNKNOWN_CLIENT } from './index.js';

/**
 * The console on each platform: a Web Request → Response route (Vercel, the dev server) and an
 * API Gateway HTTP API / function URL handler (Lambda). Both serve GET and POST.
 */

type Kinds = Parameters<typeof createConsole>[0];

/**
 * Vercel: `export const GET = createVercelConsole(jobs); export const POST = GET;` in api/admin.ts,
 * with vercel.json rewriting /admin and /admin/:path* to it (the request keeps the browser's URL).
 * The client address is x-real-ip (or x-forwarded-for's first), which Vercel's edge sets — trusted on
 * Vercel or when `trustProxyHeaders` says so (as is x-forwarded-host for the Origin check);
 * self-hosted without it, a client could send any. Also a plain (Request) => Response for any server.
 */
export function createVercelConsole(
  jobs: Kinds,
  options: ConsoleOptions = {},
): (request: Request) => Promise<Response> {
  const handle = createConsole(jobs, options);
  const env = options.env ?? process.env;
  const trusted = options.trustProxyHeaders ?? (env.VERCEL === '1' || env.SKIPLOCK_CONSOLE_TRUST_PROXY === 'true');
  return async (request) => {
    const headers = request.headers;
    const forwarded = trusted ? headers.get('x-forwarded-for')?.split(',')[0]?.trim() : undefined;
    const url = new URL(request.url);
    // The first proxy's (the one the browser reached), when there are several.
    const forwardedHost = trusted ? headers.get('x-forwarded-host')?.split(',')[0]?.trim() : undefined;
    const response = await handle({
      method: request.method,
      url,
      hosts: [headers.get('host') ?? url.host, ...(forwardedHost ? [forwardedHost] : [])],
      header: (name) => headers.get(name) ?? undefined,
      cookie: (name) => cookieFrom(headers.get('cookie') ?? undefined, name),
      client: (trusted ? headers.get('x-real-ip') : undefined) ?? forwarded ?? UNKNOWN_CLIENT,
      readBody: (maxBytes) => readWebBody(request, maxBytes),
    });
    const out = new Headers(response.headers);
    for (const cookie of response.cookies) out.append('set-cookie', cookie);
    const body = request.method.toUpperCase() === 'HEAD' || response.status === 303 ? null : response.body;
    return new Response(body, { status: response.status, headers: out });
  };
}

/** API Gateway HTTP API (payload 2.0) and function URL events, as far as the console reads them. */
export interface ConsoleHttpEvent {
  rawPath?: string;
  rawQueryString?: string;
  headers?: Record<string, string | undefined>;
  /** Payload 2.0 puts the request's cookies here, not in a cookie header. */
  cookies?: string[];
  body?: string | null;
  isBase64Encoded?: boolean;
  requestContext: { http: { method: string; sourceIp?: string }; domainName?: string };
}

export interface ConsoleHttpResult {
  statusCode: number;
  headers: Record<string, string>;
  /** Payload 2.0 sets each as its own Set-Cookie header. */
  cookies: string[];
  body: string;
}

function fromEvent(event: ConsoleHttpEvent): ConsoleRequest {
  const headers = Object.fromEntries(Object.entries(event.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  const host = headers.host ?? event.requestContext.domainName ?? 'localhost';
  const query = event.rawQueryString ? `?${event.rawQueryString}` : '';
  const cookieHeader = [...(event.cookies ?? []), ...(headers.cookie ? [headers.cookie] : [])].join('; ');
  return {
    method: event.requestContext.http.method,
    url: new URL(`https://${host}${event.rawPath ?? '/'}${query}`),
    hosts: [host],
    header: (name) => headers[name.toLowerCase()],
    cookie: (name) => cookieFrom(cookieHeader, name),
    client: event.requestContext.http.sourceIp ?? 'unknown',
    readBody: async (maxBytes) => {
      const raw = event.body ?? '';
      const bytes = event.isBase64Encoded ? Buffer.from(raw, 'base64') : Buffer.from(raw, 'utf8');
      if (bytes.length > maxBytes) throw tooLarge(maxBytes);
      return bytes.toString('utf8');
    },
  };
}

/**
 * Lambda: `export const handler = createLambdaConsole(jobs)` behind HTTP API routes `GET /admin`,
 * `ANY /admin/{proxy+}` (or a function URL). The client address is the event's sourceIp.
 */
export function createLambdaConsole(jobs: Kinds, options: ConsoleOptions = {}) {
  const handle = createConsole(jobs, options);
  return async (event: ConsoleHttpEvent): Promise<ConsoleHttpResult> => {
    let request: ConsoleRequest;
    try {
      request = fromEvent(event);
    } catch {
      return { statusCode: 400, headers: { 'content-type': 'text/plain' }, cookies: [], body: 'bad request' };
    }
    const response: ConsoleResponse = await handle(request);
    return { statusCode: response.status, headers: response.headers, cookies: response.cookies, body: response.body };
  };
}
