/**
 * The template's API Gateway HTTP API routes (`httpApi` events) on a local port: a request that
 * matches a route becomes a payload 2.0 event, invoked synchronously as API Gateway does, and the
 * function's result becomes the response (`{statusCode, headers, body}`, or any other value as a
 * JSON 200). A failed, timed-out or throttled invocation answers 500 `{"message":"Internal Server
 * Error"}`, what the HTTP API answers when its integration fails.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LocalLambda } from './server.js';
import type { HttpRouteSpec } from './template.js';

export interface LocalHttpApi {
  url: string;
  close(): Promise<void>;
}

interface Route extends HttpRouteSpec {
  pattern: RegExp | undefined; // undefined: $default
  params: string[];
}

/** `/items/{id}` → one segment; `/{proxy+}` → the rest of the path. */
function compile(route: HttpRouteSpec): Route {
  if (route.path === '$default') return { ...route, pattern: undefined, params: [] };
  const params: string[] = [];
  const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const source = route.path
    .split('/')
    .map((segment) => {
      const param = /^\{([^}]+?)(\+?)\}$/.exec(segment);
      if (!param) return literal(segment);
      params.push(param[1] as string);
      return param[2] ? '(.+)' : '([^/]+)';
    })
    .join('/');
  return { ...route, pattern: new RegExp(`^${source}$`), params };
}

function match(routes: readonly Route[], method: string, path: string) {
  const methodFits = (r: Route) => r.method === 'ANY' || r.method === method;
  for (const route of routes) {
    const found = route.pattern && methodFits(route) ? route.pattern.exec(path) : null;
    if (found) {
      const pathParameters = Object.fromEntries(
        route.params.map((name, i) => [name, decodeURIComponent(found[i + 1] ?? '')]),
      );
      return { route, pathParameters };
    }
  }
  const fallback = routes.find((r) => !r.pattern);
  return fallback ? { route: fallback, pathParameters: {} } : undefined;
}

const TEXT = /^(text\/|application\/(json|x-www-form-urlencoded|xml|javascript))|\+json|\+xml/;

function httpApiEvent(req: IncomingMessage, body: Buffer, route: Route, pathParameters: Record<string, string>) {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers))
    if (value !== undefined && name !== 'cookie') headers[name] = Array.isArray(value) ? value.join(',') : value;
  const query: Record<string, string> = {};
  for (const [name, value] of url.searchParams) query[name] = name in query ? `${query[name]},${value}` : value;
  const routeKey = route.pattern ? `${route.method} ${route.path}` : '$default';
  const isText = body.length === 0 || TEXT.test(headers['content-type'] ?? '');
  const now = new Date();
  return {
    version: '2.0',
    routeKey,
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    cookies: req.headers.cookie?.split(/;\s*/),
    headers,
    queryStringParameters: url.search ? query : undefined,
    pathParameters: route.params.length > 0 ? pathParameters : undefined,
    requestContext: {
      accountId: '000000000000',
      apiId: 'local',
      domainName: headers.host ?? 'localhost',
      domainPrefix: 'local',
      http: {
        method: req.method ?? 'GET',
        path: url.pathname,
        protocol: `HTTP/${req.httpVersion}`,
        sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
        userAgent: headers['user-agent'] ?? '',
      },
      requestId: randomUUID(),
      routeKey,
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    body: body.length === 0 ? undefined : body.toString(isText ? 'utf8' : 'base64'),
    isBase64Encoded: !isText,
  };
}

interface ProxyResult {
  statusCode: number;
  headers?: Record<string, string | number | boolean>;
  cookies?: string[];
  body?: string;
  isBase64Encoded?: boolean;
}

function send(res: ServerResponse, result: unknown) {
  if (typeof result === 'object' && result !== null && 'statusCode' in result) {
    const r = result as ProxyResult;
    res.writeHead(r.statusCode, {
      ...Object.fromEntries(Object.entries(r.headers ?? {}).map(([k, v]) => [k, String(v)])),
      ...(r.cookies ? { 'set-cookie': r.cookies } : {}),
    });
    res.end(r.body === undefined ? '' : Buffer.from(r.body, r.isBase64Encoded ? 'base64' : 'utf8'));
    return;
  }
  // Payload 2.0: a result without statusCode is the JSON body of a 200.
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(result));
}

export async function startHttpApi(
  lambda: LocalLambda,
  routes: readonly HttpRouteSpec[],
  port = 0,
): Promise<LocalHttpApi> {
  // Exact and parameterised routes first, then greedy ones, $default last.
  const compiled = routes.map(compile).sort((a, b) => Number(a.path.includes('+}')) - Number(b.path.includes('+}')));
  const server = createServer((req, res) => {
    serve(req, res).catch(() => {
      if (res.headersSent) res.destroy();
      else res.writeHead(500, { 'content-type': 'application/json' }).end('{"message":"Internal Server Error"}');
    });
  });
  async function serve(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const found = match(compiled, req.method ?? 'GET', path);
    if (!found) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"Not Found"}');
      return;
    }
    const event = httpApiEvent(req, Buffer.concat(chunks), found.route, found.pathParameters);
    const outcome = await lambda.invoke(found.route.functionName, event, 'RequestResponse');
    if (outcome === 'throttled' || !outcome.ok) {
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"message":"Internal Server Error"}');
      return;
    }
    send(res, outcome.result);
  }
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
