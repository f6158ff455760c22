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
