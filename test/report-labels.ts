import { beforeEach } from 'vitest';

declare module 'vitest' {
  interface TaskMeta {
    /** The vitest project a test ran in (pg, neon-ws, neon-http, unit, e2e, pgbouncer). */
    project?: string;
    /** Bun's version when the test ran on Bun's runtime (test/e2e/bun-drivers.test.ts reads it). */
    bun?: string;
  }
}

// The JSON report names a test's file but not its project, and a file of test/db or
// test/drivers runs in three: each test carries its project in its meta, which the report keeps.
const project = process.env.SKIPLOCK_TEST_PROJECT;
const bun = process.versions.bun;
beforeEach(({ task }) => {
  if (project) task.meta.project = project;
  if (bun) task.meta.bun = bun;
});
