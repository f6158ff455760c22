import { describe, expect, it } from 'vitest';
import { CLAIM_LANES, type ClaimRequest, claimJobs, LANE_RUN } from '../../db/statements/claim.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('lanes', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const LEASES = [{ kind: 'send-email', leaseMs: 30_000 }];
const claim = (overrides: Partial<ClaimRequest> = {}) =>
  claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: 10, invocationId: 'inv-a', ...overrides });
const laneOf = (id: string | bigint) => Number((BigInt(id) / BigInt(LANE_RUN)) % BigInt(CLAIM_LANES));
const enqueue = (n: number, priority?: number) =>
  q.enqueueMany(
    t.db,
    Array.from({ length: n }, (_, i) => sendEmail.with({ to: `u${i}@example.com`, subject: 's' }, { priority })),
  );
/** The ids still queued, in claim order. */
const queued = async () =>
  (
    await t.admin.query(
      `select j.id::text as id from "${t.schema}".jobs j where j.state = 'queued' order by j.priority, j.run_at, j.id`,
    )
  ).rows.map((r) => r.id as string);

describe(`claim lanes (${testDriver()})`, () => {
  it("a lane claim takes the lane's first jobs in claim order, not the head's", async () => {
    await enqueue(LANE_RUN * CLAIM_LANES * 2);
    const before = await queued();
    const lane = (laneOf(before[0] as string) + 3) % CLAIM_LANES;
    const { jobs } = await claim({ lane });
    const expected = before.filter((id) => laneOf(id) === lane).slice(0, 10);
    expect(jobs.map((j) => j.id)).toEqual(expected);
    // The head was left alone.
    expect((await queued())[0]).toBe(before[0]);
  });

  it('priority holds within the lane: its urgent job comes first', async () => {
    await enqueue(LANE_RUN * CLAIM_LANES);
    const lane = laneOf((await queued())[0] as string);
    const inLane = (await queued()).filter((id) => laneOf(id) === lane);
    const last = inLane[inLane.length - 1] as string;
    await t.admin.query(`update "${t.schema}".jobs set priority = -5 where id = $1`, [last]);
    const { jobs } = await claim({ lane, limit: 3 });
    expect(jobs.map((j) => j.id)).toEqual([last, ...inLane.slice(0, 2)]);
  });

  it('the head fills what the lane lacks, without taking a job twice; an expired lease still comes first', async () => {
    await enqueue(LANE_RUN * 2);
    // The lane of the head keeps only 5 ready jobs (the rest of its run is cancelled).
    const lane = laneOf((await queued())[0] as string);
    const shortened = (await queued()).filter((id) => laneOf(id) === lane).slice(5);
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'cancelled', finished_at = now() where id = any($1::bigint[])`,
      [shortened],
    );
    const all = await queued();
    const inLane = all.filter((id) => laneOf(id) === lane);
    expect(inLane).toHaveLength(5);
    // A job from another lane is held by an invocation that died.
    const rescued = all.find((id) => laneOf(id) !== lane) as string;
    const first = await claim({ lane: laneOf(rescued), limit: 1, invocationId: 'dead-holder' });
    expect(first.jobs.map((j) => j.id)).toEqual([rescued]);
    await t.admin.query(`update "${t.schema}".jobs set lease_expires_at = now() - interval '1 second' where id = $1`, [
      rescued,
    ]);
    const { jobs } = await claim({ lane, limit: 30 });
    const ids = jobs.map((j) => j.id);
    expect(ids).toHaveLength(30);
    expect(new Set(ids).size).toBe(30);
    // The rescue, the lane's 5, then the head's first 24 (the lane's are not taken again).
    const head = all.filter((id) => id !== rescued && !inLane.includes(id)).slice(0, 24);
    expect(new Set(ids)).toEqual(new Set([rescued, ...inLane, ...head]));
    expect(jobs.find((j) => j.id === rescued)?.attempt).toBe(2);
  });

  it('a lane outside 0 to CLAIM_LANES - 1 is refused', async () => {
    await expect(claim({ lane: CLAIM_LANES })).rejects.toThrow(RangeError);
    await expect(claim({ lane: -1 })).rejects.toThrow(`lane must be an integer from 0 to ${CLAIM_LANES - 1}`);
  });

  it('laneWhen: the lane only while more than `moreThan` invocations of the worker are registered', async () => {
    await enqueue(LANE_RUN * CLAIM_LANES);
    const head = (await queued())[0] as string;
    const lane = (laneOf(head) + 1) % CLAIM_LANES;
    const laneWhen = { worker: 'w', moreThan: 2 };
    const register = (slot: number, expires: string) =>
      t.admin.query(
        `insert into "${t.schema}".invocations (worker, slot, invocation_id, started_at, expires_at)
         values ($1, $2, $3, now() - interval '1 hour', now() + $4::interval)`,
        [slot < 10 ? 'w' : 'other', slot, `inv-${slot}`, expires],
      );
    // Two live registrations of w, one expired, and others of another worker: not more than 2.
    await register(1, '1 minute');
    await register(2, '1 minute');
    await register(3, '-1 minute');
    await register(11, '1 minute');
    await register(12, '1 minute');
    const first = await claim({ lane, laneWhen, limit: 1 });
    expect(first.jobs.map((j) => j.id)).toEqual([head]);
    // A third live registration: the lane is used.
    await register(4, '1 minute');
    const second = await claim({ lane, laneWhen, limit: 1 });
    expect(second.jobs.map((j) => laneOf(j.id))).toEqual([lane]);
  });
});
