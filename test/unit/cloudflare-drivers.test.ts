import { describe, expect, it } from 'vitest';
import { createCloudflareWorker } from '../../adapters/cloudflare.js';
import { platformJobs } from '../fixtures/platforms/jobs.js';
import { PLATFORM_SECRETS } from '../helpers/platforms.js';

// What skiplock/cloudflare refuses on the drivers with sockets, at the first event (a binding is only
// known then), before any statement: the Worker answers 500 with the reason and what to do instead.
describe('createCloudflareWorker on the drivers with sockets (configuration)', () => {
  const ctx = { waitUntil: () => {} };
  const refusal = async (env: Record<string, unknown>, options = {}) => {
    const worker = createCloudflareWorker(platformJobs, options);
    const response = await worker.fetch(new Request('http://localhost/skiplock/worker'), env, ctx);
    expect(response.status).toBe(500);
    return ((await response.json()) as { error: { code: string; message: string } }).error;
  };
  const base = { DATABASE_URL: 'postgres://skiplock@db.invalid/app', ...PLATFORM_SECRETS };

  it('refuses neon-http or neon-ws through a Hyperdrive binding, which only pg speaks', async () => {
    for (const driver of ['neon-http', 'neon-ws']) {
      const error = await refusal({
        ...base,
        SKIPLOCK_DRIVER: driver,
        HYPERDRIVE: { connectionString: base.DATABASE_URL },
      });
      expect(error.code).toBe('config');
      expect(error.message).toMatch(new RegExp(`SKIPLOCK_DRIVER=${driver} .*Hyperdrive binding HYPERDRIVE.*only pg`));
    }
  });

  it('refuses a pool larger than the six connections a request may hold open', async () => {
    const error = await refusal({ ...base, SKIPLOCK_DRIVER: 'pg', SKIPLOCK_POOL_MAX: '8' });
    expect(error.message).toMatch(/SKIPLOCK_POOL_MAX=8, but a request holds at most 6 connections open/);
  });

  it('refuses a Hyperdrive binding named in the options that the Worker does not have', async () => {
    const error = await refusal(base, { hyperdrive: 'DB' });
    expect(error.message).toMatch(/no Hyperdrive binding named DB/);
  });
});
