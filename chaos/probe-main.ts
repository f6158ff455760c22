/**
 * `npm run chaos:probe -- --driver pg|neon-ws|neon-http [--markdown]`: the fault probe on one driver
 * (chaos/probe.ts). Prints a line per operation and fault, then its table (--markdown: the table
 * alone, as docs/reliability.md holds it) and the `probe: …` line; exits 1 when a guarantee did not
 * hold or a fault never met its statement.
 */
import { DRIVERS, type Driver } from '../db/connect.js';
import { probeTable, runProbe } from './probe.js';

const args = process.argv.slice(2);
const i = args.indexOf('--driver');
const driver = (i >= 0 ? args[i + 1] : 'pg') as Driver;
if (!DRIVERS.includes(driver)) {
  console.error(`--driver must be one of ${DRIVERS.join(', ')}`);
  process.exit(2);
}
const markdown = args.includes('--markdown');
try {
  const report = await runProbe({
    driver,
    databaseUrl: process.env.DATABASE_URL,
    progress: markdown ? undefined : (line) => console.log(line),
  });
  console.log(probeTable(report));
  if (!markdown) console.log(report.line);
  process.exit(report.failed ? 1 : 0);
} catch (err) {
  console.error(`fault probe failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(2);
}
