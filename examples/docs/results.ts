// Results and resumable progress (docs/kinds-and-enqueue.md).
import { connect, createEnqueuer, defineJob, getJob } from 'skiplock';
import { z } from 'zod';

const db = connect({ connectionString: process.env.DATABASE_URL! });
declare const mailer: { send(to: string): Promise<{ id: string }> };
declare const source: { page(n: number): Promise<string[]> };
declare const store: { append(reportId: string, rows: string[]): Promise<void> };

// #region result
export const sendEmail = defineJob({
  kind: 'send-email',
  payload: z.object({ to: z.email() }),
  // What the handler returns (JSON, up to the worker's maxResultBytes) is stored with the completion.
  handler: async (p) => ({ messageId: (await mailer.send(p.to)).id }),
});

const { id } = await createEnqueuer().enqueue(db, sendEmail, { to: 'ada@example.com' });
// …once it has run:
const job = await getJob(db, id);
console.log(job?.state, job?.result); // 'completed' { messageId: '…' }
// #endregion result

// #region progress
export const buildReport = defineJob({
  kind: 'build-report',
  payload: z.object({ reportId: z.string(), pages: z.number().int() }),
  timeoutMs: 60_000,
  handler: async (p, ctx) => {
    // A retry (or a rescue after the lease ran out) starts after the last page it reported.
    const done = (ctx.lastProgress as { page: number } | null)?.page ?? 0;
    for (let page = done + 1; page <= p.pages; page++) {
      await store.append(p.reportId, await source.page(page));
      await ctx.reportProgress({ page });
    }
  },
});
// #endregion progress
