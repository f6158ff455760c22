/**
 * Five-field cron expressions (minute hour day-of-month month day-of-week), as vercel.json
 * uses them: numbers, `*`, `*\/n`, ranges `a-b` (with `/n`) and lists `a,b`. Evaluated in UTC.
 */
const FIELDS = [
  { min: 0, max: 59 },
  { min: 0, max: 23 },
  { min: 1, max: 31 },
  { min: 1, max: 12 },
  { min: 0, max: 6 },
] as const;

export function parseCron(expression: string): Set<number>[] {
  const parts = expression.trim().split(/\s+/);
  if (parts.length !== 5) throw new Error(`cron "${expression}" needs 5 fields`);
  return parts.map((part, i) => {
    const { min, max } = FIELDS[i] as { min: number; max: number };
    const values = new Set<number>();
    for (const item of part.split(',')) {
      const match = /^(\*|(\d+)(?:-(\d+))?)(?:\/(\d+))?$/.exec(item);
      if (!match) throw new Error(`cron "${expression}": cannot read "${item}"`);
      const from = match[1] === '*' ? min : Number(match[2]);
      const to = match[1] === '*' ? max : match[3] !== undefined ? Number(match[3]) : match[4] ? max : from;
      const step = match[4] ? Number(match[4]) : 1;
      if (from < min || to > max || from > to || step < 1)
        throw new Error(`cron "${expression}": "${item}" is out of range`);
      for (let v = from; v <= to; v += step) values.add(v);
    }
    return values;
  });
}

export function cronMatches(fields: Set<number>[], date: Date): boolean {
  const [minute, hour, day, month, weekday] = fields as [
    Set<number>,
    Set<number>,
    Set<number>,
    Set<number>,
    Set<number>,
  ];
  return (
    minute.has(date.getUTCMinutes()) &&
    hour.has(date.getUTCHours()) &&
    day.has(date.getUTCDate()) &&
    month.has(date.getUTCMonth() + 1) &&
    weekday.has(date.getUTCDay())
  );
}

/**
 * An EventBridge `rate(…)` expression (`rate(1 minute)`, `rate(10 minutes)`, `rate(2 hours)`,
 * `rate(1 day)`) → its interval in milliseconds, as serverless.yml's `schedule` events use them.
 */
export function parseRate(expression: string): number {
  const match = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression.trim());
  const value = Number(match?.[1]);
  if (!match || value < 1) throw new Error(`schedule "${expression}": expected rate(<n> minute(s)|hour(s)|day(s))`);
  const unit = match[2] as string;
  const unitMs = unit.startsWith('minute') ? 60_000 : unit.startsWith('hour') ? 3_600_000 : 86_400_000;
  // EventBridge takes the singular for 1 and the plural otherwise, and refuses the rest.
  if ((value === 1) !== !unit.endsWith('s'))
    throw new Error(`schedule "${expression}": EventBridge wants a singular unit for 1, a plural one otherwise`);
  return value * unitMs;
}
