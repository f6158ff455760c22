import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { cancel, getJob } from '../../core/admin.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { replay } from '../../core/replay.js';
import { setupTestSchema, type TestContext, testDriver } from '../helpers/db.js';
import { captureStatements } from '../helpers/statements.js';

let t: TestContext;
beforeAll(async () => {
  t = await setupTestSchema('parameters');
});
afterAll(() => t.close());

const HOSTILE = `x'); drop table jobs; -- "quoted" \\ $1 %s ${'\u0007'} ünï`;
const note = defineJob({ kind: 'note', payload: z.object({ text: z.string() }) });

describe(`every value travels as a parameter (${testDriver()})`, () => {
  it('hostile payloads, dedupe keys, correlation ids and filters reach no SQL text and are stored verbatim', async () => {
    const enqueuer = createEnqueuer({ schema: t.schema });
    const { result, texts } = await captureStatements(testDriver(), async () => {
      const enqueued = await enqueuer.enqueue(
        t.db,
        note,
        { text: HOSTILE },
        { dedupe: { key: HOSTILE }, correlationId: HOSTILE },
      );
      await replay(t.db, { kind: 'note', reason: HOSTILE, by: HOSTILE, schema: t.schema, dryRun: true });
      await cancel(t.db, [enqueued.id], { schema: t.schema });
      return enqueued;
    });
    expect(texts.length).toBeGreaterThanOrEqual(3);
    for (const text of texts) {
      expect(text).not.toContain('drop table');
      expect(text).not.toContain('ünï');
    }
    const job = await getJob(t.db, result.id, { schema: t.schema });
    expect(job).toMatchObject({
      payload: { text: HOSTILE },
      dedupeKey: HOSTILE,
      correlationId: HOSTILE,
      state: 'cancelled',
    });
  });
});
