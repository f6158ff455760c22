/** What one run of a job (or workflow) cost: wall time and the SQL texts the client sent. */
export interface Run {
  ms: number;
  texts: string[];
}

/** Runs one job of `n` steps: through the system's step API, or with the bodies called directly. */
export type RunJob = (n: number, durable: boolean) => Promise<Run>;

/** Named patterns that sort a system's statements, for the per-step breakdown; the rest is "other". */
export type Classes = [label: string, pattern: RegExp][];

export interface Row {
  system: string;
  driver: string;
  steps: number;
  /** Median over pairs of (durable job − direct job), divided by the steps. */
  msPerStep: number;
  statementsPerStep: number;
  /** Median extra wall time of the whole job. */
  jobOverheadMs: number;
  /** Extra statements per job, by class (the medians of each pair's differences). */
  extra: Record<string, number>;
}

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

const classify = (texts: string[], classes: Classes) => {
  const counts: Record<string, number> = Object.fromEntries([...classes.map(([l]) => [l, 0]), ['other', 0]]);
  for (const text of texts) {
    const label = classes.find(([, pattern]) => pattern.test(text))?.[0] ?? 'other';
    counts[label] = (counts[label] ?? 0) + 1;
  }
  return counts;
};

/**
 * `reps` pairs of jobs of `n` steps, one durable and one direct, back to back (which goes first
 * alternates), after `warmup` discarded pairs: the overhead is each pair's difference, so a drift
 * of the machine's speed between pairs cancels out.
 */
export async function measureSteps(
  label: { system: string; driver: string },
  run: RunJob,
  n: number,
  options: { reps: number; warmup: number; classes: Classes },
): Promise<Row> {
  const ms: number[] = [];
  const statements: number[] = [];
  const byClass: Record<string, number[]> = {};
  for (let rep = -options.warmup; rep < options.reps; rep++) {
    const pair = new Map<boolean, Run>();
    for (const durable of rep % 2 ? [true, false] : [false, true]) pair.set(durable, await run(n, durable));
    if (rep < 0) continue;
    const [durable, direct] = [pair.get(true), pair.get(false)] as [Run, Run];
    ms.push(durable.ms - direct.ms);
    statements.push(durable.texts.length - direct.texts.length);
    const [a, b] = [classify(durable.texts, options.classes), classify(direct.texts, options.classes)];
    for (const key of Object.keys(a)) byClass[key] = [...(byClass[key] ?? []), (a[key] ?? 0) - (b[key] ?? 0)];
  }
  const jobOverheadMs = median(ms);
  return {
    ...label,
    steps: n,
    msPerStep: jobOverheadMs / n,
    statementsPerStep: median(statements) / n,
    jobOverheadMs,
    extra: Object.fromEntries(Object.entries(byClass).map(([k, v]) => [k, median(v)])),
  };
}

const fixed = (value: number, digits: number) => value.toFixed(digits);

/** The table: one line per system, driver and steps per job; the 100-step overhead on the 100-step line. */
export function renderTable(rows: Row[]): string {
  const header = [
    'system',
    'driver',
    'steps/job',
    'ms per step (median)',
    'statements per step',
    '100-step job overhead ms',
  ];
  const lines = rows.map((r) => [
    r.system,
    r.driver,
    String(r.steps),
    fixed(r.msPerStep, 3),
    fixed(r.statementsPerStep, 2),
    r.steps === 100 ? fixed(r.jobOverheadMs, 1) : '',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] as string).length)));
  const fmt = (cells: string[]) =>
    `| ${cells.map((c, i) => (i < 2 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join(' | ')} |`;
  return [
    fmt(header),
    `|${widths.map((w, i) => `${'-'.repeat(w + 1)}${i < 2 ? '-' : ':'}`).join('|')}|`,
    ...lines.map(fmt),
  ].join('\n');
}

/** Where the extra statements of the 100-step jobs went, per job. */
export function renderBreakdown(rows: Row[]): string {
  return rows
    .filter((r) => r.steps === 100)
    .map((r) => {
      const parts = Object.entries(r.extra)
        .filter(([, v]) => v !== 0)
        .map(([k, v]) => `${v > 0 ? '+' : ''}${v} ${k}`);
      return `  ${r.system} / ${r.driver}, 100 steps: ${parts.join(', ') || 'none'}`;
    })
    .join('\n');
}
