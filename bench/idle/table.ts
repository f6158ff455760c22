// docs/cost.md's table of the simulated idle day, made from bench/RESULTS.idle.json (written by
// `npm run bench:idle -- --write`); test/unit/docs-figures.test.ts checks the page against it.
import type { IdleDay } from './day.js';

export interface IdleResults {
  date: string;
  idle_day: { lambda: IdleDay['hours']; vercel: IdleDay['hours'] };
  jobs: { lambda: IdleDay['jobs']; vercel: IdleDay['jobs'] };
  database_active_minutes: { lambda: number; vercel: number };
}

const late = (ms: number | null) =>
  ms === null ? 'never' : ms < 1_000 ? `${ms} ms` : `${(ms / 3_600_000).toFixed(1)} h`;

/** The markdown table: the hours anything happened in, the rest summed, and each job's lateness. */
export function idleDayTable(results: IdleResults): string {
  const { lambda, vercel } = results.idle_day;
  const busy = lambda
    .map((l, i) => ({ l, v: vercel[i] as (typeof vercel)[number] }))
    .filter(({ l, v }) => l.statements + v.statements > 0 || l.due.length + v.due.length > 0);
  const quiet = 24 - busy.length;
  const sum = (hours: typeof lambda, key: 'statements' | 'invocations') => hours.reduce((n, h) => n + h[key], 0);
  const due = (a: string[], b: string[]) => [...new Set([...a, ...b])].join(', ');
  const rows = [
    '| hour | due | Lambda: statements | Lambda: invocations | Vercel: statements | Vercel: invocations |',
    '| --- | --- | --- | --- | --- | --- |',
    ...busy.map(
      ({ l, v }) =>
        `| ${String(l.hour).padStart(2, '0')}:00 | ${due(l.due, v.due)} | ${l.statements} | ${l.invocations} | ${v.statements} | ${v.invocations} |`,
    ),
    `| the other ${quiet} hours | nothing | 0 | ${sum(lambda, 'invocations') - busy.reduce((n, { l }) => n + l.invocations, 0)} | 0 | ${sum(vercel, 'invocations') - busy.reduce((n, { v }) => n + v.invocations, 0)} |`,
    `| **the day** | | **${sum(lambda, 'statements')}** | **${sum(lambda, 'invocations')}** | **${sum(vercel, 'statements')}** | **${sum(vercel, 'invocations')}** |`,
  ];
  const jobs = results.jobs.lambda.map((l) => {
    const v = results.jobs.vercel.find((j) => j.name === l.name);
    return `| ${l.name} | ${late(l.lateMs)} | ${late(v?.lateMs ?? null)} |`;
  });
  return [
    ...rows,
    '',
    `Database active (a Neon compute that suspends after 5 idle minutes): ${results.database_active_minutes.lambda} minutes of the day on Lambda, ${results.database_active_minutes.vercel} on Vercel. Measured ${results.date}.`,
    '',
    '| job | late on Lambda | late on Vercel |',
    '| --- | --- | --- |',
    ...jobs,
  ].join('\n');
}
