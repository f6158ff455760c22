import { beforeEach } from 'vitest';

declare module 'vitest' {
  interface TaskMeta {
    /** The vitest project a test ran in (pg, neon-ws, neon-http, unit, e2e, pgbouncer). */
    project?: string;
  }
}

// The JSON report names a test's file but not its project, and a file of test/db or
// test/drivers runs in three: each test carries its project in its meta, which the report keeps.
const project = process.env.SKIPLOCK_TEST_PROJECT;
beforeEach(({ task }) => {
  if (project) task.meta.project = project;
});
