import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The database-backed suite runs once per driver; pure unit tests run once.
const drivers = ['pg', 'neon-ws', 'neon-http'] as const;

// The app in functions/ and api/ imports the package by name ('skiplock/lambda'), as a user's app
// does. Here those names resolve to the sources: each export's ./dist/x.js maps to ./x.ts (the
// same mapping as tsconfig.json's paths, which test/unit/package.test.ts keeps in step).
const pkg = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')) as {
  exports: Record<string, string | { import: string }>;
};
const alias = Object.entries(pkg.exports)
  .filter((entry): entry is [string, { import: string }] => typeof entry[1] === 'object')
  .map(([subpath, target]) => ({
    find: new RegExp(`^${`skiplock${subpath.slice(1)}`.replaceAll('/', '\\/')}$`),
    replacement: fileURLToPath(
      new URL(target.import.replace('./dist/', './').replace(/\.js$/, '.ts'), import.meta.url),
    ),
  }));

export default defineConfig({
  resolve: { alias },
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
