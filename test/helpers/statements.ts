import { Client as NeonClient, neonConfig } from '@neondatabase/serverless';
import pg from 'pg';
import type { Driver } from '../../db/connect.js';

/**
 * Captures the SQL text of every statement a driver sends while `fn` runs: node-postgres and
 * Neon WebSocket client queries, or SQL-over-HTTP requests (a batch counts each query).
 * `onStatement` sees each text as it is sent.
 */
export async function captureStatements<T>(
  driver: Driver,
  fn: () => Promise<T>,
  onStatement: (text: string) => void = () => {},
): Promise<{ result: T; texts: string[] }> {
  const texts: string[] = [];
  const push = (...sent: string[]) => {
    texts.push(...sent);
    for (const text of sent) onStatement(text);
  };
  if (driver === 'neon-http') {
    const previous = neonConfig.fetchFunction;
    neonConfig.fetchFunction = async (input: string, init: { body?: string }) => {
      const body = JSON.parse(String(init?.body ?? '{}')) as { query?: string; queries?: { query: string }[] };
      // The hot statements go in a batch behind `set local jit = off` (db/drivers/neon-http.ts): one
      // round trip, counted once.
      if (body.queries) push(...body.queries.map((q) => q.query).filter((q) => q !== 'set local jit = off'));
      else push(String(body.query));
      return fetch(input, init as RequestInit);
    };
    try {
      return { result: await fn(), texts };
    } finally {
      neonConfig.fetchFunction = previous;
    }
  }
  const proto = (driver === 'pg' ? pg.Client.prototype : NeonClient.prototype) as {
    query: (...args: unknown[]) => unknown;
  };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0];
    const text = typeof first === 'string' ? first : String((first as { text?: string })?.text ?? '');
    // A hot statement's BEGIN and COMMIT (db/drivers/pg-pool.ts) are written with it, in pipeline
    // mode: one round trip, counted once.
    const envelope =
      (this as { pipeline?: boolean }).pipeline === true && (text === 'commit' || text.startsWith('begin;'));
    if (!envelope) push(text);
    return original.apply(this, args);
  };
  try {
    return { result: await fn(), texts };
  } finally {
    proto.query = original;
  }
}

/** How many statements a driver sends while `fn` runs. */
export async function countStatements<T>(
  driver: Driver,
  fn: () => Promise<T>,
): Promise<{ result: T; statements: number }> {
  const { result, texts } = await captureStatements(driver, fn);
  return { result, statements: texts.length };
}
