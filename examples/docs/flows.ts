// Dependencies between jobs (docs/flows.md).
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { connect, defineJob, enqueue, enqueueChain, enqueueFlow } from 'skiplock';
import { z } from 'zod';

const db = connect({ connectionString: process.env.DATABASE_URL! });
const app = drizzle(process.env.DATABASE_URL!);
declare const storage: { resize(image: string, width: number): Promise<string> };

const resize = defineJob({
  kind: 'resize-image',
  payload: z.object({ image: z.string(), width: z.number().int() }),
  handler: async (p) => ({ url: await storage.resize(p.image, p.width) }),
});
const publish = defineJob({
  kind: 'publish-post',
  payload: z.object({ postId: z.number().int() }),
  handler: async (_p, ctx) => {
    const urls = (await ctx.parents()).map((parent) => (parent.result as { url: string }).url);
    return { published: urls.length };
  },
});

// #region chain
// Each runs after the one before it completed: resize, then publish.
const [resized, published] = await enqueueChain(db, [
  resize.with({ image: 'cat.png', width: 800 }),
  publish.with({ postId: 7 }),
]);
// #endregion chain

// #region after-ids
// In your own transaction, after jobs enqueued earlier (their ids, or what enqueue returned).
await app.transaction(async (tx) => {
  await tx.execute(sql`update posts set state = 'publishing' where id = 7`);
  const thumb = await enqueue(tx, resize, { image: 'cat.png', width: 200 });
  await enqueue(tx, publish, { postId: 7 }, { after: [resized!, thumb], onParentFailure: 'run' });
});
// #endregion after-ids

// #region fan-in
// A fan-out and a fan-in in one statement: three sizes side by side, then one publish.
const flow = await enqueueFlow(db, {
  small: resize.with({ image: 'dog.png', width: 200 }),
  medium: resize.with({ image: 'dog.png', width: 800 }),
  large: resize.with({ image: 'dog.png', width: 1600 }),
  publish: publish.with({ postId: 8 }, { after: ['small', 'medium', 'large'] }),
});
console.log(flow.publish.id, published?.id);
// #endregion fan-in
