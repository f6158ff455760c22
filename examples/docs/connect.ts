// connect() with every option at its default, and Neon driver settings.
declare const proxyPort: number;

// #region connect-options
import { connect } from 'skiplock';

const db = connect({
  connectionString: process.env.DATABASE_URL!, // postgres:// or postgresql://
  driver: 'pg', // 'pg' | 'neon-ws' | 'neon-http'
  max: 5,
  statementTimeoutMs: 10_000,
  queryTimeoutMs: 15_000,
  connectionTimeoutMs: 5_000,
  idleTimeoutMs: 10_000,
});
// #endregion connect-options

// #region connect-neon
const neonDb = connect({
  connectionString: process.env.DATABASE_URL!,
  driver: 'neon-ws',
  // Against Neon itself none are needed; these reach a plain Postgres through a local proxy.
  neon: {
    wsProxy: (host, port) => `127.0.0.1:${proxyPort}/v1?address=${host}:${port}`,
    useSecureWebSocket: false,
    pipelineTLS: false,
    pipelineConnect: false,
    coalesceWrites: false, // the default adds ~1 ms per query
  },
});
// #endregion connect-neon
await Promise.all([db.close(), neonDb.close()]);
