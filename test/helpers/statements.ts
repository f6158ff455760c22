import { Client as NeonClient, neonConfig } from '@neondatabase/serverless';
import pg from 'pg';
import type { Driver } from '../../db/connect.js';

/**
 * Counts the statements a driver sends while `fn` runs: node-postgres and Neon WebSocket
 * client queries, or SQL-over-HTTP requests (a batch counts each of its queries).
 */
export async function countStatements<T>(
  driver: Driver,
  fn: () => Promise<T>,
): Promise<{ result: T; statements: number }> {
  let statements = 0;
  if (driver === 'neon-http') {
    const previous = neonConfig.fetchFunction;
    neonConfig.fetchFunction = async (input: string, init: { body?: string }) => {
      const body = JSON.parse(String(init?.body ?? '{}')) as { queries?: unknown[] };
      statements += body.queries ? body.queries.length : 1;
      return fetch(input, init as RequestInit);
    };
    try {
      return { result: await fn(), statements };
    } finally {
      neonConfig.fetchFunction = previous;
    }
  }
  const proto = (driver === 'pg' ? pg.Client.prototype : NeonClient.prototype) as {
    query: (...args: unknown[]) => unknown;
  };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    statements++;
    return original.apply(this, args);
  };
  try {
    return { result: await fn(), statements };
  } finally {
    proto.query = original;
  }
}
