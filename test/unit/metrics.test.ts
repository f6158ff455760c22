import { describe, expect, it } from 'vitest';
import { emfMetrics } from '../../adapters/metrics.js';

describe('CloudWatch Embedded Metric Format', () => {
  const lines: string[] = [];
  const sink = emfMetrics(
    (l) => lines.push(l),
    () => 1_795_300_000_000,
  );

  it('an invocation summary becomes one EMF document with its metrics declared', () => {
    sink.invocation(
      {
        invocationId: 'i',
        claimed: 5,
        completed: 3,
        retried: 1,
        dead: 1,
        cancelled: 0,
        released: 0,
        leaseLost: 0,
        durationMs: 420,
        stoppedBecause: 'drained',
        scheduled: 2,
        runtimeScheduled: 3,
        rateWaitMs: 900,
      },
      'app-prod-worker',
    );
    const doc = JSON.parse(lines.pop() as string);
    expect(doc._aws).toEqual({
      Timestamp: 1_795_300_000_000,
      CloudWatchMetrics: [
        {
          Namespace: 'skiplock',
          Dimensions: [['Service']],
          Metrics: expect.arrayContaining([
            { Name: 'JobsDead', Unit: 'Count' },
            { Name: 'SuccessfulInvocations', Unit: 'Count' },
            { Name: 'InvocationDuration', Unit: 'Milliseconds' },
          ]),
        },
      ],
    });
    expect(doc).toMatchObject({
      Service: 'app-prod-worker',
      JobsCompleted: 3,
      JobsDead: 1,
      SuccessfulInvocations: 1,
      InvocationErrors: 0,
      // Both kinds of schedules: 2 from code, 3 created at run time.
      JobsScheduled: 5,
      RateLimitWait: 900,
    });
    // Every declared metric has a value in the document.
    for (const m of doc._aws.CloudWatchMetrics[0].Metrics) expect(typeof doc[m.Name]).toBe('number');
  });

  it('an invocation that stopped with no_kind_fits counts as an error: the worker can run nothing', () => {
    const summary = {
      invocationId: 'i',
      claimed: 0,
      completed: 0,
      retried: 0,
      dead: 0,
      cancelled: 0,
      released: 0,
      leaseLost: 0,
      durationMs: 40,
    };
    sink.invocation({ ...summary, stoppedBecause: 'no_kind_fits' }, 'app-prod-worker');
    expect(JSON.parse(lines.pop() as string)).toMatchObject({ SuccessfulInvocations: 0, InvocationErrors: 1 });
    sink.invocation({ ...summary, stoppedBecause: 'drained' }, 'app-prod-worker');
    expect(JSON.parse(lines.pop() as string)).toMatchObject({ SuccessfulInvocations: 1, InvocationErrors: 0 });
  });

  it('queue stats become one document per queue (kinds summed) and one for the whole service', () => {
    const row = {
      ready: 2,
      scheduled: 0,
      retryWaiting: 1,
      waiting: 0,
      running: 1,
      leaseExpired: 0,
      dead: 3,
      completedLastHour: 9,
      deadLastHour: 1,
      cancelledLastHour: 0,
      sleeping: 0,
      waitingForSignal: 0,
      unserved: false,
      unfit: null,
    };
    sink.queues(
      [
        { queue: 'emails', kind: 'a', ...row, oldestReadyAgeSeconds: 30, paused: null },
        {
          queue: 'emails',
          kind: 'b',
          ...row,
          oldestReadyAgeSeconds: 90.4,
          paused: { scope: 'kind', since: new Date(0), by: 'ops' },
        },
        { queue: 'reports', kind: 'c', ...row, oldestReadyAgeSeconds: null, paused: null },
      ],
      'app-prod-maintenance',
    );
    const docs = lines.splice(0).map((l) => JSON.parse(l));
    expect(docs).toHaveLength(3);
    expect(docs[0]).toMatchObject({
      Queue: 'emails',
      QueueReady: 4,
      QueuePausedReady: 2,
      DeadJobs: 6,
      OldestReadyAge: 90,
    });
    expect(docs[1]).toMatchObject({ Queue: 'reports', QueuePausedReady: 0 });
    expect(docs[0]._aws.CloudWatchMetrics[0].Dimensions).toEqual([['Service', 'Queue']]);
    expect(docs[2]).toMatchObject({
      Service: 'app-prod-maintenance',
      QueueReady: 6,
      QueuePausedReady: 2,
      DeadJobs: 9,
      OldestReadyAge: 90,
    });
    expect(docs[2].Queue).toBeUndefined();
  });
});
