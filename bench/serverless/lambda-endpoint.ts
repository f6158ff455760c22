import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One invoke the endpoint received, with when it arrived (performance.now()). */
export interface ReceivedInvoke {
  functionName: string;
  invocationType: string;
  /** The event's `reason` (skiplock's nudge and fan-out events say why), else its `source`. */
  reason: string;
  at: number;
}

export type FunctionHandler = (event: unknown) => Promise<unknown>;

/**
 * A local AWS Lambda Invoke API for the benchmark (POST /2015-03-31/functions/{name}/invocations),
 * which the real `@aws-sdk/client-lambda` reaches through AWS_ENDPOINT_URL_LAMBDA. An `Event` invoke
 * is answered 202 and its handler then runs in this process, as Lambda runs it after queueing the
 * event; `RequestResponse` runs it and answers with its result. It counts the handlers running
 * at once where they run: no concurrency limit is applied here, so a fan-out that overshot its cap
 * would show in `peak()` (saturated invocations included, for the moment they take to return).
 */
export async function startInvokeEndpoint(functions: Record<string, FunctionHandler>) {
  const invokes: ReceivedInvoke[] = [];
  const background = new Set<Promise<unknown>>();
  let running = 0;
  let peak = 0;
  const run = (handler: FunctionHandler, event: unknown) => {
    running++;
    peak = Math.max(peak, running);
    const done = handler(event).finally(() => {
      running--;
      background.delete(done);
    });
    background.add(done);
    return done;
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const match = /^\/2015-03-31\/functions\/([^/]+)\/invocations/.exec(req.url ?? '');
      const functionName = decodeURIComponent(match?.[1] ?? '');
      const handler = functions[functionName];
      if (req.method !== 'POST' || !handler) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"Function not found"}');
        return;
      }
      const invocationType = String(req.headers['x-amz-invocation-type'] ?? 'RequestResponse');
      const text = Buffer.concat(chunks).toString('utf8');
      const event = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      const reason = String(event?.reason ?? event?.source ?? 'direct');
      invokes.push({ functionName, invocationType, reason, at: performance.now() });
      if (invocationType === 'Event') {
        res.writeHead(202).end();
        void run(handler, event).catch(() => {});
        return;
      }
      run(handler, event).then(
        (result) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(result ?? null)),
        () =>
          res
            .writeHead(200, { 'content-type': 'application/json', 'x-amz-function-error': 'Unhandled' })
            .end('{"errorMessage":"handler failed"}'),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    invokes,
    /** Handlers running right now. */
    running: () => running,
    /** Most handlers running at once since the start (or the last resetPeak). */
    peak: () => peak,
    resetPeak: () => {
      peak = running;
    },
    /** Waits until every handler (and those they started) has returned, or `timeoutMs` passed; true when all did. */
    settled: async (timeoutMs = 120_000): Promise<boolean> => {
      const deadline = performance.now() + timeoutMs;
      while (background.size > 0) {
        const left = deadline - performance.now();
        if (left <= 0) return false;
        await Promise.race([
          Promise.allSettled([...background]),
          new Promise((resolve) => setTimeout(resolve, left).unref()),
        ]);
      }
      return true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export type InvokeEndpoint = Awaited<ReturnType<typeof startInvokeEndpoint>>;
