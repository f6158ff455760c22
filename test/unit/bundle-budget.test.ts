import { describe, expect, it } from 'vitest';
import { bundleFunction, WORKER_BUDGET } from '../../scripts/bundle.js';

// The worker's cold start pays for every byte of its bundle. Size only: its cold import time is
// printed by `npm run bundle-report` and the bench, a timing no test asserts.
//
// The budget is 350 KB (WORKER_BUDGET, which bundle-report prints against). What keeps the pg worker
// under it: zod/mini in the app's kinds and in skiplock, and a pool that runs skiplock's statements
// without a Drizzle database (db/drivers/pg-lean.ts; Drizzle's query builders are ~84 KB).
describe('worker bundle budget', () => {
  it('bundles the pg worker (as serverless.yml does) within the 350 KB budget, minified', async () => {
    expect(WORKER_BUDGET.bytes).toBe(358_400);
    const bundle = await bundleFunction('worker', 'pg');
    expect(
      bundle.byteLength,
      `worker bundle is ${bundle.byteLength} bytes; npm run bundle-report lists every function`,
    ).toBeLessThanOrEqual(WORKER_BUDGET.bytes);
    // Drizzle's database (its select builder) stays out: only skiplock's own statements run here.
    expect(new TextDecoder().decode(bundle)).not.toContain('PgSelectQueryBuilder');
  });
});

// The sizes the docs quote: docs/bundle-sizes.md, which test/unit/docs-figures.test.ts rebuilds.
