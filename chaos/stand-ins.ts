import { connect, type Driver, type SkiplockDb } from '../db/connect.js';
import type { NeonOptions } from '../db/connection-options.js';
import { type FaultCounts, Faults, type RandomFaults } from '../testing/faults.js';
import { startNeonHttpEndpoint } from '../testing/neon-http-endpoint.js';
import { localNeonOptions } from '../testing/neon-local.js';
import { startNeonWsProxy } from '../testing/neon-ws-proxy.js';
import { startPgProxy } from '../testing/pg-proxy.js';

/** How a worker process reaches Postgres through the run's faulty stand-in. */
export interface FaultyConnection {
  driver: Driver;
  connectionString: string;
  /** neon-ws / neon-http: Neon's settings pointing at the stand-in. */
  neonEndpoints?: { wsProxyPort: number; httpUrl: string };
}

export function neonOptionsOf(connection: FaultyConnection): NeonOptions | undefined {
  return connection.neonEndpoints ? localNeonOptions(connection.neonEndpoints) : undefined;
}

/** A small pool through the stand-in, with short timeouts (the harness's senders: signals, live enqueues, replays). */
export function connectFaulty(connection: FaultyConnection): SkiplockDb {
  return connect({
    connectionString: connection.connectionString,
    driver: connection.driver,
    neon: neonOptionsOf(connection),
    max: 2,
    statementTimeoutMs: 2_000,
    queryTimeoutMs: 2_500,
    connectionTimeoutMs: 1_000,
  });
}

export interface StandIn {
  connection: FaultyConnection;
  faults: Faults;
  /** A compute waking from scale-to-zero (neon-http): every request refused for `ms`. */
  sleep(ms: number): void;
  counts(): FaultCounts;
  close(): Promise<void>;
}

/**
 * The faults a chaos run draws, per statement and per connection, as each driver's path to Postgres
 * produces them: a TCP proxy for pg (resets, half-open sockets, lost and slow answers), Neon's
 * WebSocket proxy for neon-ws (the same, and frames delayed at random), Neon's HTTP endpoint for
 * neon-http (requests refused or dropped before they run, answers lost after COMMIT, slow answers,
 * requests never answered; the harness also puts its compute to sleep now and then).
 */
export function chaosFaults(driver: Driver, perTick: number, halfOpenShare: number, scale = 1): RandomFaults {
  const statements: RandomFaults = {
    refuse: 0.002 * scale,
    drop: 0.002 * scale,
    loseAnswer: 0.006 * scale,
    halfOpen: 0.001 * scale,
    slow: { share: 0.003 * scale, minMs: 1_000, maxMs: 5_000 },
  };
  if (driver === 'neon-http') return statements;
  return {
    ...statements,
    connectionFaultPerTick: perTick,
    halfOpenShare,
    ...(driver === 'neon-ws' ? { frameDelayMs: 3 } : {}),
  };
}

export async function startStandIn(driver: Driver, databaseUrl: string): Promise<StandIn> {
  const faults = new Faults();
  if (driver === 'pg') {
    const upstream = new URL(databaseUrl);
    const proxy = await startPgProxy({
      upstreamHost: upstream.hostname,
      upstreamPort: Number(upstream.port || 5432),
      faults,
    });
    return standIn({ driver, connectionString: proxy.urlFor(databaseUrl) }, faults, proxy.close);
  }
  if (driver === 'neon-ws') {
    const proxy = await startNeonWsProxy({ faults });
    const neonEndpoints = { wsProxyPort: proxy.port, httpUrl: 'http://127.0.0.1:1/unused' };
    return standIn({ driver, connectionString: databaseUrl, neonEndpoints }, faults, proxy.close);
  }
  const endpoint = await startNeonHttpEndpoint({ faults });
  const neonEndpoints = { wsProxyPort: 1, httpUrl: endpoint.url };
  return standIn({ driver, connectionString: databaseUrl, neonEndpoints }, faults, endpoint.close);
}

function standIn(connection: FaultyConnection, faults: Faults, close: () => Promise<void>): StandIn {
  return {
    connection,
    faults,
    sleep: (ms) => faults.sleep(ms),
    counts: () => faults.counts(),
    close,
  };
}
