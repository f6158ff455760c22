import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';

/**
 * A local stand-in for Neon's SQL-over-HTTP endpoint, over node-postgres: one query per
 * POST, or a batch run in BEGIN … COMMIT. Values go back as raw text (the driver parses
 * them), rows as arrays, errors as HTTP 400 with the SQLSTATE — what drizzle's neon-http
 * driver expects. It counts statements so tests can count round trips.
 */
export async function startNeonHttpEndpoint(): Promise<{
  url: string;
  close(): Promise<void>;
}> {
  const pools = new Map<string, pg.Pool>();
  const poolFor = (connectionString: string) => {
    let pool = pools.get(connectionString);
    if (!pool) {
      pool = new pg.Pool({ connectionString, max: 20 });
      pool.on('error', () => {});
      pools.set(connectionString, pool);
    }
    return pool;
  };
  const rawText = { getTypeParser: () => (value: string) => value };

  type Query = { query: string; params?: unknown[] };
  const run = async (client: pg.Pool | pg.PoolClient, q: Query) => {
    const result = await client.query({ text: q.query, values: q.params ?? [], rowMode: 'array', types: rawText });
    return {
      fields: result.fields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID })),
      rows: result.rows,
      command: result.command,
      rowCount: result.rowCount,
      rowAsArray: true,
    };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    try {
      const connectionString = String(req.headers['neon-connection-string'] ?? '');
      const pool = poolFor(connectionString);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Query | { queries: Query[] };
      if ('queries' in body) {
        const client = await pool.connect();
        try {
          const isolation = String(req.headers['neon-batch-isolation-level'] ?? 'ReadCommitted')
            .replace(/([a-z])([A-Z])/g, '$1 $2')
            .toUpperCase();
          const readOnly = req.headers['neon-batch-read-only'] === 'true' ? ' READ ONLY' : '';
          await client.query(`BEGIN ISOLATION LEVEL ${isolation}${readOnly}`);
          const results = [];
          for (const q of body.queries) results.push(await run(client, q));
          await client.query('COMMIT');
          reply(200, { results });
        } catch (err) {
          await client.query('ROLLBACK').catch(() => {});
          throw err;
        } finally {
          client.release();
        }
      } else {
        reply(200, await run(pool, body));
      }
    } catch (err) {
      const e = err as { message?: string; code?: string; detail?: string; constraint?: string };
      reply(400, { message: e.message ?? 'error', code: e.code, detail: e.detail, constraint: e.constraint });
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/sql`,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([...pools.values()].map((p) => p.end()));
    },
  };
}
