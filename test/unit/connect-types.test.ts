import { describe, expect, it } from 'vitest';
import { connect } from '../../db/connect.js';

// connect() with the driver named types `db` as that driver's Drizzle database. Before, every driver
// gave AnyPgDatabase, and neon-http's `db.batch` (how an enqueue joins your writes there) needed a
// cast: `Property 'batch' does not exist on type 'AnyPgDatabase'` (the typecheck in .ci/run).
describe('connect() types db by the driver it names', () => {
  it("neon-http's db has batch, and nothing is sent until a statement is", async () => {
    const conn = connect({ connectionString: 'postgres://app@127.0.0.1:9/app', driver: 'neon-http' });
    expect(conn.driver).toBe('neon-http');
    expect(typeof conn.db.batch).toBe('function');
    await conn.close();
  });
});
