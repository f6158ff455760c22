import { createServer, type Server } from 'node:http';

/**
 * A local stand-in for the endpoint Vercel's Runtime Cache client (`getCache()` of
 * `@vercel/functions`) talks to when RUNTIME_CACHE_ENDPOINT and RUNTIME_CACHE_HEADERS are set, as
 * that client's source uses it: GET `<endpoint><key>` → 200 with `x-vercel-cache-state: fresh` and
 * the JSON value, or 404; POST `<endpoint><key>` stores the JSON body for `x-vercel-revalidate`
 * seconds; DELETE removes it. It checks the headers it was given and records each request.
 */
export async function startRuntimeCacheEndpoint(headers: Record<string, string>): Promise<{
  endpoint: string;
  requests: { method: string; key: string; ttl?: string }[];
  close: () => Promise<void>;
}> {
  const values = new Map<string, string>();
  const requests: { method: string; key: string; ttl?: string }[] = [];
  const server: Server = createServer((req, res) => {
    const key = decodeURIComponent((req.url ?? '/').slice(1));
    const authorized = Object.entries(headers).every(([name, value]) => req.headers[name.toLowerCase()] === value);
    if (!authorized) {
      res.writeHead(401).end();
      return;
    }
    const ttl = req.headers['x-vercel-revalidate'];
    requests.push({ method: req.method ?? '', key, ttl: typeof ttl === 'string' ? ttl : undefined });
    if (req.method === 'GET') {
      const value = values.get(key);
      if (value === undefined) res.writeHead(404).end();
      else res.writeHead(200, { 'content-type': 'application/json', 'x-vercel-cache-state': 'fresh' }).end(value);
      return;
    }
    if (req.method === 'DELETE') {
      values.delete(key);
      res.writeHead(200).end();
      return;
    }
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      values.set(key, body);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}/`,
    requests,
    close: () => new Promise((done) => server.close(() => done())),
  };
}
