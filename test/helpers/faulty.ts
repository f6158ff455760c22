import { afterAll, beforeAll, beforeEach } from 'vitest';
import { connect, type SkiplockDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { Faults } from '../../testing/faults.js';
import { startNeonHttpEndpoint } from '../../testing/neon-http-endpoint.js';
import { localNeonOptions } from '../../testing/neon-local.js';
import { startNeonWsProxy } from '../../testing/neon-ws-proxy.js';
import { startPgProxy } from '../../testing/pg-proxy.js';
import { databaseUrl, openAdminPool, schemaFor, testDriver, truncateTables } from './db.js';

/**
 * The driver under test reaching Postgres through a stand-in of this process that fails on
 * purpose: a TCP proxy for pg, a WebSocket proxy for neon-ws, the SQL-over-HTTP endpoint for
 * neon-http (Neon keeps its settings process-wide: a file that uses this connects only this way).
 */
export interface FaultyContext {
  db: SkiplockDb;
  faults: Faults;
  admin: ReturnType<typeof openAdminPool>;
  schema: string;
  /** Another connection through the same stand-in (its own pool). */
  open(options?: { max?: number; queryTimeoutMs?: number }): SkiplockDb;
}

export function useFaultySchema(label: string, ready: (t: FaultyContext) => void): void {
  let close: (() => Promise<void>) | undefined;
  let context: FaultyContext | undefined;
  beforeAll(async () => {
    const driver = testDriver();
    const faults = new Faults();
    const url = databaseUrl();
    let open: FaultyContext['open'];
    let stop: () => Promise<void>;
    if (driver === 'pg') {
      const upstream = new URL(url);
      const proxy = await startPgProxy({
        upstreamHost: upstream.hostname,
        upstreamPort: Number(upstream.port || 5432),
        faults,
      });
      open = (options) => connect({ connectionString: proxy.urlFor(url), driver, queryTimeoutMs: 5_000, ...options });
      stop = proxy.close;
    } else if (driver === 'neon-ws') {
      const proxy = await startNeonWsProxy({ faults });
      const neon = localNeonOptions({ wsProxyPort: proxy.port, httpUrl: 'http://127.0.0.1:1/unused' });
      open = (options) => connect({ connectionString: url, driver, neon, queryTimeoutMs: 5_000, ...options });
      stop = proxy.close;
    } else {
      const endpoint = await startNeonHttpEndpoint({ faults });
      const neon = localNeonOptions({ wsProxyPort: 1, httpUrl: endpoint.url });
      open = (options) => connect({ connectionString: url, driver, neon, queryTimeoutMs: 5_000, ...options });
      stop = endpoint.close;
    }
    const admin = openAdminPool();
    const schema = schemaFor(label);
    await admin.query(`drop schema if exists "${schema}" cascade`);
    const direct = connect({ connectionString: url, driver: 'pg' });
    await migrate(direct, { schema });
    await direct.close();
    const db = open({ max: 4 });
    context = { db, faults, admin, schema, open };
    ready(context);
    close = async () => {
      await db.close();
      await admin.query(`drop schema if exists "${schema}" cascade`).catch(() => {});
      await admin.end();
      await stop();
    };
  });
  afterAll(() => close?.());
  beforeEach(async () => {
    if (!context) return;
    context.faults.clear();
    await truncateTables(context.admin, context.schema);
  });
}
