import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { Faults } from './faults.js';
import { listenOn } from './listen.js';

/**
 * A local stand-in for Neon's SQL-over-HTTP endpoint, over node-postgres: one query per
 * POST, or a batch run in BEGIN … COMMIT. Values go back as raw text (the driver parses
 * them), rows as arrays, errors as HTTP 400 with the SQLSTATE — what drizzle's neon-http
 * driver expects. `faults` act per request: refused (503) or dropped before it runs, its answer
 * lost after it committed, answered late, or never answered. `addedRoundTripMs` plays a link that
 * far from the database: every request waits half of it before it runs and half before its answer.
 */
export async function startNeonHttpEndpoint(
  options: { faults?: Faults; addedRoundTripMs?: number; port?: number } = {},
): Promise<{
  url: string;
  faults: Faults;
  close(): Promise<void>;
}> {
  const faults = options.faults ?? new Faults();
  const halfTrip = (options.addedRoundTripMs ?? 0) / 2;
  const travel = () => (halfTrip > 0 ? new Promise((resolve) => setTimeout(resolve, halfTrip)) : undefined);
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

  const execute = async (req: IncomingMessage, body: Query | { queries: Query[] }) => {
    const pool = poolFor(String(req.headers['neon-connection-string'] ?? ''));
    if (!('queries' in body)) return run(pool, body);
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
      return { results };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    await travel();
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    let answer: { status: number; body: unknown };
    let fault: ReturnType<Faults['decide']>;
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Query | { queries: Query[] };
      fault = faults.decide('queries' in body ? body.queries.map((q) => q.query).join(';\n') : body.query);
      if (fault?.mode === 'refuse') {
        reply(503, { message: 'the compute is not reachable (a fault of the local stand-in)' });
        return;
      }
      if (fault?.mode === 'drop') {
        req.socket.destroy();
        return;
      }
      answer = { status: 200, body: await execute(req, body) };
    } catch (err) {
      const e = err as { message?: string; code?: string; detail?: string; constraint?: string };
      answer = {
        status: 400,
        body: { message: e.message ?? 'error', code: e.code, detail: e.detail, constraint: e.constraint },
      };
    }
    if (fault?.mode === 'lose-answer') {
      req.socket.destroy();
      return;
    }
    if (fault?.mode === 'half-open') {
      faults.held(1);
      setTimeout(() => {
        faults.held(-1);
        req.socket.destroy();
      }, fault.delayMs).unref();
      return;
    }
    if (fault?.mode === 'slow') await new Promise((resolve) => setTimeout(resolve, fault?.delayMs));
    await travel();
    reply(answer.status, answer.body);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  await listenOn(server, options.port ?? 0);
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/sql`,
    faults,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([...pools.values()].map((p) => p.end()));
    },
  };
}
