import { defineConfig } from 'vitest/config';

// The database-backed suite runs once per driver; pure unit tests run once.
const drivers = ['pg', 'neon-ws', 'neon-http'] as const;

export default defineConfig({
  test: {
    // .ci/run sets SKIPLOCK_TEST_REPORT to read the counts from vitest's JSON report.
    reporters: process.env.SKIPLOCK_TEST_REPORT ? ['default', 'json'] : ['default'],
    outputFile: process.env.SKIPLOCK_TEST_REPORT ? { json: process.env.SKIPLOCK_TEST_REPORT } : undefined,
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      ...drivers.map((driver) => ({
        extends: true as const,
        test: {
          name: driver,
          include: ['test/db/**/*.test.ts', 'test/core/**/*.test.ts', 'test/functions/**/*.test.ts'],
          env: { SKIPLOCK_TEST_DRIVER: driver },
        },
      })),
      { extends: true as const, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      // Needs the pgbouncer binary; run by `npm run test:pgbouncer` (and .ci/run), not `npm test`.
      ...(process.env.SKIPLOCK_TEST_PGBOUNCER
        ? [{ extends: true as const, test: { name: 'pgbouncer', include: ['test/pgbouncer/**/*.test.ts'] } }]
        : []),
    ],
  },
});
