// What both simulated idle days (bench/idle/lambda.ts, bench/idle/vercel.ts) count, and how: every
// statement and new connection any pg client in the process sends, at the simulated time it is sent.
import pg from 'pg';

export interface IdleHour {
  hour: number;
  statements: number;
  connections: number;
  invocations: number;
  due: string[];
}
export interface IdleDay {
  hours: IdleHour[];
  jobs: { name: string; dueAt: string; ranAt: string | null; lateMs: number | null }[];
  /**
   * Minutes of the day a Neon compute that suspends after 5 idle minutes would be running: the union
   * of [statement, statement + 5 min] over the day's statements.
   */
  databaseActiveMinutes: number;
}

const HOUR = 3_600_000;
/** Neon's default: a compute suspends after this long without a statement. */
export const SUSPEND_AFTER_MS = 5 * 60_000;

/** Records the simulated time (`now()`, epoch ms) of every statement and new connection until stop(). */
export function countPgTraffic(now: () => number) {
  const statements: number[] = [];
  const connections: number[] = [];
  const proto = pg.Client.prototype as unknown as {
    query: (...args: unknown[]) => unknown;
    connect: (...args: unknown[]) => unknown;
  };
  const { query, connect: open } = proto;
  proto.query = function (this: { pipeline?: boolean }, ...args: unknown[]) {
    const first = args[0];
    const text = typeof first === 'string' ? first : String((first as { text?: string })?.text ?? '');
    // A hot statement's pipelined BEGIN and COMMIT go in its round trip (test/helpers/statements.ts).
    if (!(this.pipeline === true && (text === 'commit' || text.startsWith('begin;')))) statements.push(now());
    return query.apply(this, args);
  };
  proto.connect = function (this: unknown, ...args: unknown[]) {
    connections.push(now());
    return open.apply(this, args);
  };
  return {
    stop() {
      proto.query = query;
      proto.connect = open;
    },
    /** Per hour of the day that starts at `dayStart`: statements and connections sent in it. */
    hourly(dayStart: number): { statements: number[]; connections: number[] } {
      const count = (times: number[]) => {
        const perHour = new Array<number>(24).fill(0);
        for (const t of times) {
          const hour = Math.floor((t - dayStart) / HOUR);
          if (hour >= 0 && hour < 24) perHour[hour] = (perHour[hour] ?? 0) + 1;
        }
        return perHour;
      };
      return { statements: count(statements), connections: count(connections) };
    },
    /** Minutes of the day a compute suspending after SUSPEND_AFTER_MS idle would run. */
    activeMinutes(dayStart: number): number {
      const dayEnd = dayStart + 24 * HOUR;
      let active = 0;
      let coveredTo = dayStart;
      for (const t of [...statements].sort((a, b) => a - b)) {
        if (t < dayStart || t >= dayEnd) continue;
        const end = Math.min(t + SUSPEND_AFTER_MS, dayEnd);
        active += Math.max(0, end - Math.max(t, coveredTo));
        coveredTo = Math.max(coveredTo, end);
      }
      return Math.round(active / 60_000);
    },
  };
}
