import type { NeonOptions } from '../db/connection-options.js';
import type { Faults } from './faults.js';
import { startNeonHttpEndpoint } from './neon-http-endpoint.js';
import { startNeonWsProxy } from './neon-ws-proxy.js';

/**
 * Neon's drivers pointed at a plain Postgres: `wsProxy` at a WebSocket-to-TCP proxy on
 * `127.0.0.1:wsProxyPort` (what Neon's wsproxy does), `fetchEndpoint` at a SQL-over-HTTP endpoint
 * (what Neon's HTTP API does), without TLS or pipelining. Pass the result as `connect({ neon })`.
 */
export function localNeonOptions(endpoints: { wsProxyPort: number; httpUrl: string }): NeonOptions {
  return {
    wsProxy: (host, port) => `127.0.0.1:${endpoints.wsProxyPort}/v1?address=${host}:${port}`,
    useSecureWebSocket: false,
    pipelineTLS: false,
    pipelineConnect: false,
    // The default coalesces writes and adds ~1 ms to every query.
    coalesceWrites: false,
    fetchEndpoint: endpoints.httpUrl,
  };
}

export interface LocalNeon {
  /** For `connect({ connectionString, driver: 'neon-ws' | 'neon-http', neon })`. */
  neon: NeonOptions;
  wsProxyPort: number;
  httpUrl: string;
  /**
   * The faults each stand-in inflicts, none until a test arms one: `ws` on the WebSocket proxy's
   * connections, `http` on the endpoint's requests (see Faults).
   */
  faults: { ws: Faults; http: Faults };
  close(): Promise<void>;
}

/**
 * Starts both stand-ins on 127.0.0.1, for development and tests on a local Postgres (the connection
 * string's host and port say which): on free ports, or on `httpPort` and `wsProxyPort` — fixed ones
 * keep a variables file's SKIPLOCK_NEON_FETCH_ENDPOINT right across restarts. Use a user with trust,
 * md5 or password auth: SCRAM makes every new WebSocket connection cost 0.5–1 s of pure-JS hashing.
 */
export async function startLocalNeon(ports: { httpPort?: number; wsProxyPort?: number } = {}): Promise<LocalNeon> {
  const proxy = await startNeonWsProxy({ port: ports.wsProxyPort });
  const http = await startNeonHttpEndpoint({ port: ports.httpPort }).catch(async (err) => {
    await proxy.close();
    throw err;
  });
  return {
    neon: localNeonOptions({ wsProxyPort: proxy.port, httpUrl: http.url }),
    wsProxyPort: proxy.port,
    httpUrl: http.url,
    faults: { ws: proxy.faults, http: http.faults },
    close: async () => {
      await proxy.close();
      await http.close();
    },
  };
}
