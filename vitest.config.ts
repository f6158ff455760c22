import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Tests by seam. What can differ between drivers runs on each of them: the statements
// (test/db) and a smoke set that drives the core and the deployed functions through each driver
// (test/drivers). What sits above the driver — the worker loop, the adapters, the console
// (test/core, test/functions) — and the concurrency simulations (test/concurrency) run on pg
// only. Unit tests (test/unit: no database, no child process) run once; so do the end-to-end ones
// (test/e2e: whole programs — the CLI, packaging, next, cdk, the demo, chaos, the drills — on Postgres).
const drivers = ['pg', 'neon-ws', 'neon-http'] as const;
const everyDriver = ['test/db/**/*.test.ts', 'test/drivers/**/*.test.ts'];
const pgOnly = ['test/core/**/*.test.ts', 'test/functions/**/*.test.ts', 'test/concurrency/**/*.test.ts'];

// The app in functions/ and api/ imports the package by name ('skiplock/lambda'), as a user's app
// does. Here those names resolve to the sources: each export's ./dist/x.js maps to ./x.ts (the
// same mapping as tsconfig.json's paths, which test/e2e/package.test.ts keeps in step).
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
    // Under Bun (test/e2e/bun-drivers.test.ts runs test/drivers there) every module namespace answers
    // `'__esModule' in ns` with true (oven-sh/bun#39888 would make it false, as on Node), so vitest's
    // default-export interop takes zod's `default` (the namespace of its internals) for the whole
    // module, and `import { z } from 'zod'` is undefined. Bun's own import already gives a CommonJS
    // package its named exports and its default, which is all that interop adds on Node.
    deps: { interopDefault: !process.versions.bun },
    // Labels each test with its project in the JSON report (.ci/run reads it).
    setupFiles: ['test/report-labels.ts'],
    // Vitest's default on 2 cores is one worker (CPUs - 1), but most of a test file's time is spent
    // waiting on Postgres, a child process or a timer. Measured on 2 cores: 3 files at once took the
    // suite from 324 s to ~170 s; 2 and 4 were slower than 3. More would also need more of Postgres's
    // connections (100 by default; a simulation opens up to 16).
    maxWorkers: 3,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      ...drivers.map((driver) => ({
        extends: true as const,
        test: {
          name: driver,
          include: driver === 'pg' ? [...everyDriver, ...pgOnly] : everyDriver,
          env: { SKIPLOCK_TEST_DRIVER: driver, SKIPLOCK_TEST_PROJECT: driver },
        },
      })),
      {
        extends: true as const,
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], env: { SKIPLOCK_TEST_PROJECT: 'unit' } },
      },
      {
        extends: true as const,
        test: { name: 'e2e', include: ['test/e2e/**/*.test.ts'], env: { SKIPLOCK_TEST_PROJECT: 'e2e' } },
      },
      // Needs the pgbouncer binary; run by `npm run test:pgbouncer` (and .ci/run), not `npm test`.
      ...(process.env.SKIPLOCK_TEST_PGBOUNCER
        ? [
            {
              extends: true as const,
              test: {
                name: 'pgbouncer',
                include: ['test/pgbouncer/**/*.test.ts'],
                env: { SKIPLOCK_TEST_PROJECT: 'pgbouncer' },
              },
            },
          ]
        : []),
    ],
  },
});
