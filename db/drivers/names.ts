export const DRIVERS = ['pg', 'neon-ws', 'neon-http'] as const;
/**
 * - `pg`: node-postgres Pool (any Postgres, PgBouncer in transaction mode). The default.
 * - `neon-ws`: Neon's WebSocket Pool (interactive transactions, Neon or a wsproxy).
 * - `neon-http`: Neon's HTTP driver (one request per statement; no interactive transactions).
 */
export type Driver = (typeof DRIVERS)[number];
