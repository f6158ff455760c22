import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

let t: TestContext;
useTestSchema('core-schema-outdated', (ctx) => {
  t = ctx;
});

// New code deployed before its migration ran: the worker must say the schema is older than the
// code, and to migrate first, rather than a bare "column does not exist"; the job waits, unharmed.
describe('a worker on a schema older than its code', () => {
  it('stops its invocation with schema_outdated, naming what is missing; the job keeps its attempts', async () => {
    const noop = defineJob({ kind: 'noop', payload: z.object({}), handler: async () => {} });
    const [job] = await enqueuerFor(t.schema).enqueueMany(t.db, [noop.with({})]);
    await t.admin.query(`alter table "${t.schema}".jobs drop column lease_token cascade`);
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [noop],
      logger: silentLogger,
    }).runInvocation({ remainingMs: 300_000 });
    expect(summary).toMatchObject({ stoppedBecause: 'error', errorCode: 'schema_outdated', claimed: 0 });
    expect(summary.error).toMatch(/older than this code \(column .*lease_token.* does not exist\)/);
    expect(summary.error).toMatch(/Migrate first, then deploy/);
    const { rows } = await t.admin.query(`select state, attempt from "${t.schema}".jobs where id = $1`, [job?.id]);
    expect(rows).toEqual([{ state: 'queued', attempt: 0 }]);
  });
});
