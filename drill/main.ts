/**
 * `npm run drill [-- --quick] [-- --json]`: the partner-outage drill, with and without the circuit
 * breaker. Prints one JSON object with --json: `{ with_breaker, without_breaker, rate_limit }`.
 */
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { DRILL_FULL, DRILL_QUICK, runDrill } from './run.js';

const args = process.argv.slice(2);
const json = args.includes('--json');
const say = (line: string) => (json ? process.stderr.write(`${line}\n`) : console.log(line));
const database = await resolveTestDatabase();
const options = { ...(args.includes('--quick') ? DRILL_QUICK : DRILL_FULL), databaseUrl: database.url, progress: say };
say(
  `drill: ${options.jobs} webhooks, ${Math.round(options.failingShare * 100)} % to a partner down for ${options.downMs / 1000} s; the others answer 500 to 10 % and hang on 10 %`,
);
try {
  const without = await runDrill(options, 'plain');
  say(`without breaker: ${JSON.stringify(without)}`);
  const withBreaker = await runDrill(options, 'breaker');
  say(`with breaker: ${JSON.stringify(withBreaker)}`);
  const rated = await runDrill(options, 'rated');
  say(`with breaker and ${options.ratePerS}/s per partner: ${JSON.stringify(rated)}`);
  const report = {
    with_breaker: withBreaker,
    without_breaker: without,
    // A third run: the breaker and a rate limit for each partner. The most requests one partner got
    // within any second, with the limit and without it (the breaker run).
    rate_limit: {
      limit_per_s: options.ratePerS,
      max_observed_per_s: rated.max_requests_per_s,
      max_observed_per_s_without_limit: withBreaker.max_requests_per_s,
      with_rate_limit: rated,
    },
  };
  if (json) console.log(JSON.stringify(report));
  else console.log(JSON.stringify(report, null, 2));
  await database.stop();
  process.exit(withBreaker.lost + without.lost + rated.lost > 0 ? 1 : 0);
} catch (err) {
  console.error(`drill failed: ${err instanceof Error ? err.message : String(err)}`);
  await database.stop();
  process.exit(2);
}
