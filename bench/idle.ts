/**
 * `npm run bench:idle [-- --json]`: a simulated day of an idle app on each platform, with a supplied
 * clock (no waiting): one retry due at 10:00, an enqueue at 14:00, a schedule at 18:00 and a job
 * written with raw SQL at 20:00. Counts, per hour, the statements and connections the database saw
 * and the function invocations; says when each job ran. With --json prints
 * `{ idle_day: { lambda: [...], vercel: [...] }, jobs: {...}, targets: {...} }`; otherwise a table
 * per platform. docs/cost.md's idle figures come from this run.
 */
import { writeFileSync } from 'node:fs';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import type { IdleDay, IdleHour } from './idle/day.js';
import { simulateDay as lambdaDay } from './idle/lambda.js';
import { type IdleResults, idleDayTable } from './idle/table.js';
import { simulateDay as vercelDay } from './idle/vercel.js';

const asJson = process.argv.includes('--json');
/** --write: bench/RESULTS.idle.json, which docs/cost.md's table is checked against. */
const write = process.argv.includes('--write');
const database = await resolveTestDatabase();
try {
  const days: Record<'lambda' | 'vercel', IdleDay> = {
    lambda: await lambdaDay({ databaseUrl: database.url }),
    vercel: await vercelDay({ databaseUrl: database.url }),
  };
  const targets = Object.fromEntries(
    Object.entries(days).map(([platform, day]) => [platform, meetsTargets(day)]),
  ) as Record<keyof typeof days, ReturnType<typeof meetsTargets>>;
  const results: IdleResults = {
    date: new Date().toISOString().slice(0, 10),
    idle_day: { lambda: days.lambda.hours, vercel: days.vercel.hours },
    jobs: { lambda: days.lambda.jobs, vercel: days.vercel.jobs },
    database_active_minutes: { lambda: days.lambda.databaseActiveMinutes, vercel: days.vercel.databaseActiveMinutes },
  };
  if (write) writeFileSync('bench/RESULTS.idle.json', `${JSON.stringify(results, null, 2)}\n`);
  if (asJson) {
    console.log(JSON.stringify({ ...results, targets }, null, 2));
  } else {
    for (const [platform, day] of Object.entries(days)) {
      console.log(`\n${platform}: hour, statements, connections, invocations, due`);
      for (const h of day.hours) console.log(row(h));
      for (const job of day.jobs) console.log(`  ${job.name}: due ${job.dueAt}, ran ${job.ranAt ?? 'never'}`);
      console.log(`  database active: ${day.databaseActiveMinutes} min`);
      const t = targets[platform as keyof typeof days];
      console.log(`  targets: ${t.ok ? 'met' : `missed — ${t.problems.join('; ')}`}`);
    }
    console.log(`\n${idleDayTable(results)}`);
  }
  if (!Object.values(targets).every((t) => t.ok)) process.exitCode = 1;
} finally {
  await database.stop();
}

function row(h: IdleHour): string {
  return `  ${String(h.hour).padStart(2, '0')}:00  ${String(h.statements).padStart(4)}  ${String(h.connections).padStart(3)}  ${String(h.invocations).padStart(4)}  ${h.due.join(', ')}`;
}

/** No statement in an hour with nothing due; every job no later than a per-minute tick (the raw write: the recheck). */
function meetsTargets(day: IdleDay): { ok: boolean; problems: string[] } {
  const problems: string[] = [];
  for (const h of day.hours) {
    if (h.due.length === 0 && h.statements > 0)
      problems.push(`${h.statements} statements at ${h.hour}:00 with nothing due`);
  }
  for (const job of day.jobs) {
    if (job.lateMs === null) problems.push(`${job.name} never ran`);
    else if (job.name !== 'raw-insert' && job.lateMs > 60_000) problems.push(`${job.name} ran ${job.lateMs} ms late`);
  }
  return { ok: problems.length === 0, problems };
}
