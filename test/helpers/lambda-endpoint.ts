import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll } from 'vitest';

export interface RecordedInvoke {
  functionName: string;
  invocationType: string;
  payload: unknown;
}

/**
 * A local AWS Lambda Invoke API (POST /2015-03-31/functions/{name}/invocations): it records each
 * invoke and, for a function it was given a handler for, runs it — an `Event` invoke in the
 * background after answering 202, as Lambda does. The real SDK client reaches it through
 * AWS_ENDPOINT_URL_LAMBDA.
 */
export async function startLambdaEndpoint(handlers: Record<string, (event: unknown) => Promise<unknown>> = {}) {
  const invokes: RecordedInvoke[] = [];
  const waiting: { count: number; resolve: () => void }[] = [];
  const background = new Set<Promise<unknown>>();
  let running = 0;
  let peak = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const match = /^\/2015-03-31\/functions\/([^/]+)\/invocations/.exec(req.url ?? '');
      if (req.method !== 'POST' || !match) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"not found"}');
        return;
      }
      const functionName = decodeURIComponent(match[1] as string);
      const invocationType = String(req.headers['x-amz-invocation-type'] ?? 'RequestResponse');
      const text = Buffer.concat(chunks).toString('utf8');
      const payload = text ? (JSON.parse(text) as unknown) : null;
      invokes.push({ functionName, invocationType, payload });
      for (const w of waiting.splice(0)) {
        if (invokes.length >= w.count) w.resolve();
        else waiting.push(w);
      }
      const handler = handlers[functionName];
      if (invocationType === 'Event') {
        res.writeHead(202).end();
        if (handler) {
          running++;
          peak = Math.max(peak, running);
          const run = handler(payload).finally(() => {
            running--;
            background.delete(run);
          });
          background.add(run);
        }
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('null');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    invokes,
    /** Resolves once `count` invokes have arrived. */
    invoked: (count: number) =>
      new Promise<void>((resolve) => {
        if (invokes.length >= count) resolve();
        else waiting.push({ count, resolve });
      }),
    /** Most handlers running at once. */
    peak: () => peak,
    /** Waits until every background run (and those they start) has ended. */
    settled: async () => {
      while (background.size > 0) await Promise.allSettled([...background]);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * Registers hooks that give the real AWS SDK a region and credentials it never needs to check (the
 * local endpoints accept anything), restoring the environment after the file.
 */
export function useLocalAwsCredentials(): void {
  const saved = { ...process.env };
  beforeAll(() => {
    Object.assign(process.env, { AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' });
  });
  afterAll(() => {
    process.env = saved;
  });
}
