import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../core/jobs.js';
import type { Logger } from '../../core/logger.js';
import { createWorker } from '../../core/worker.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

// A worker whose invocations are shorter than a kind's timeout never runs that kind: it says so, once
// per warm instance, instead of stopping at its deadline with nothing claimed and no word why.
let t: TestContext;
useTestSchema('core-unfit-kinds', (ctx) => {
  t = ctx;
});

describe('kinds that never fit the invocation', () => {
  it('are named in one kinds_never_fit warning per warm instance; the kinds that fit still run', async () => {
    const lines: { message: string; fields: Record<string, unknown> | undefined }[] = [];
    const logger: Logger = {
      debug() {},
      info() {},
      warn: (message, fields) => void lines.push({ message, fields }),
      error() {},
    };
    const payload = z.object({ n: z.number() });
    const slow = defineJob({ kind: 'slow-report', payload, timeoutMs: 30_000, handler: () => {} });
    const quick = defineJob({ kind: 'quick', payload, timeoutMs: 1_000, handler: () => {} });
    await enqueuerFor(t.schema).enqueueMany(t.db, [slow.with({ n: 1 }), quick.with({ n: 2 })]);
    const worker = createWorker({ db: t.db, schema: t.schema, jobs: [slow, quick], logger });
    expect(await worker.runInvocation({ remainingMs: 10_000 })).toMatchObject({ completed: 1 });
    expect(await worker.runInvocation({ remainingMs: 10_000 })).toMatchObject({ completed: 0 });
    const warned = lines.filter((l) => l.message === 'kinds_never_fit');
    expect(warned).toHaveLength(1);
    expect(warned[0]?.fields).toMatchObject({ kinds: [{ kind: 'slow-report', timeoutMs: 30_000 }], budgetMs: 9_000 });
  });
});
