import type { QueueStatsRow } from '../base/rows.js';
import type { InvocationSummary } from '../core/worker/index.js';

/**
 * CloudWatch Embedded Metric Format: one JSON line that CloudWatch Logs turns into metrics,
 * with no API call and no extra permission. Namespace `skiplock`.
 */
export interface MetricsSink {
  invocation(summary: InvocationSummary, service: string): void;
  queues(rows: readonly QueueStatsRow[], service: string): void;
}

type Unit = 'Count' | 'Milliseconds' | 'Seconds';

function emfLine(
  dimensions: Record<string, string>,
  metrics: Record<string, { value: number; unit: Unit }>,
  timestamp: number,
): string {
  const dimensionNames = Object.keys(dimensions);
  return JSON.stringify({
    _aws: {
      Timestamp: timestamp,
      CloudWatchMetrics: [
        {
          Namespace: 'skiplock',
          Dimensions: [dimensionNames],
          Metrics: Object.entries(metrics).map(([name, m]) => ({ Name: name, Unit: m.unit })),
        },
      ],
    },
    ...dimensions,
    ...Object.fromEntries(Object.entries(metrics).map(([name, m]) => [name, m.value])),
  });
}

/** EMF lines to `write` (stdout by default, where Lambda's log agent picks them up). */
export function emfMetrics(
  write: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
  now: () => number = Date.now,
): MetricsSink {
  return {
    invocation(summary, service) {
      const count = (value: number) => ({ value, unit: 'Count' as const });
      // A worker none of whose kinds fits its invocations can run nothing: a failure to the alarms.
      const failed = summary.stoppedBecause === 'error' || summary.stoppedBecause === 'no_kind_fits';
      write(
        emfLine(
          { Service: service },
          {
            Invocations: count(1),
            SuccessfulInvocations: count(failed ? 0 : 1),
            InvocationErrors: count(failed ? 1 : 0),
            JobsClaimed: count(summary.claimed),
            JobsCompleted: count(summary.completed),
            JobsRetried: count(summary.retried),
            JobsDead: count(summary.dead),
            JobsReleased: count(summary.released),
            LeasesLost: count(summary.leaseLost),
            // Occurrences of schedules (code and run-time) this invocation's tick enqueued, and time a
            // rate held it back.
            JobsScheduled: count((summary.scheduled ?? 0) + (summary.runtimeScheduled ?? 0)),
            RateLimitWait: { value: summary.rateWaitMs ?? 0, unit: 'Milliseconds' },
            InvocationDuration: { value: summary.durationMs, unit: 'Milliseconds' },
          },
          now(),
        ),
      );
      // One line per breaker transition, by destination: alarm on BreakerOpened.
      for (const move of summary.breakers ?? []) {
        write(
          emfLine(
            { Service: service, Destination: move.destination },
            {
              BreakerOpened: count(move.to === 'open' ? 1 : 0),
              BreakerHalfOpened: count(move.to === 'half_open' ? 1 : 0),
              BreakerClosed: count(move.to === 'closed' ? 1 : 0),
            },
            now(),
          ),
        );
      }
    },
    queues(rows, service) {
      // Per queue (kinds summed), plus one line without a queue for whole-service alarms.
      const byQueue = new Map<
        string,
        { ready: number; paused: number; retry: number; running: number; expired: number; dead: number; oldest: number }
      >();
      for (const r of rows) {
        const q = byQueue.get(r.queue) ?? { ready: 0, paused: 0, retry: 0, running: 0, expired: 0, dead: 0, oldest: 0 };
        q.ready += r.ready;
        if (r.paused) q.paused += r.ready;
        q.retry += r.retryWaiting;
        q.running += r.running;
        q.expired += r.leaseExpired;
        q.dead += r.dead;
        q.oldest = Math.max(q.oldest, r.oldestReadyAgeSeconds ?? 0);
        byQueue.set(r.queue, q);
      }
      const all = { ready: 0, paused: 0, retry: 0, running: 0, expired: 0, dead: 0, oldest: 0 };
      for (const [queue, q] of byQueue) {
        write(emfLine({ Service: service, Queue: queue }, queueMetrics(q), now()));
        all.ready += q.ready;
        all.paused += q.paused;
        all.retry += q.retry;
        all.running += q.running;
        all.expired += q.expired;
        all.dead += q.dead;
        all.oldest = Math.max(all.oldest, q.oldest);
      }
      write(emfLine({ Service: service }, queueMetrics(all), now()));
    },
  };
}

function queueMetrics(q: {
  ready: number;
  paused: number;
  retry: number;
  running: number;
  expired: number;
  dead: number;
  oldest: number;
}) {
  return {
    QueueReady: { value: q.ready, unit: 'Count' as const },
    // Ready jobs no claim takes while their queue or kind is paused (included in QueueReady).
    QueuePausedReady: { value: q.paused, unit: 'Count' as const },
    QueueRetryWaiting: { value: q.retry, unit: 'Count' as const },
    QueueRunning: { value: q.running, unit: 'Count' as const },
    QueueExpiredLeases: { value: q.expired, unit: 'Count' as const },
    DeadJobs: { value: q.dead, unit: 'Count' as const },
    OldestReadyAge: { value: Math.round(q.oldest), unit: 'Seconds' as const },
  };
}
