/**
 * The fault probe: every operation an application or a worker sends, under every fault a stand-in
 * can make, one at a time, on one driver — what the caller heard, and whether the guarantee held
 * (chaos/probe-scenarios.ts). Deterministic, unlike the chaos harness: each fault is armed on the
 * operation's own statement. `npm run chaos:probe -- --driver pg|neon-ws|neon-http [--markdown]`;
 * test/drivers/fault-probe.test.ts runs it on each driver and compares docs/reliability.md's table.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { connect, type Driver } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { FAULT_MODES, type FaultMode } from '../testing/faults.js';
import { type ProbeOutcome, SCENARIOS } from './probe-scenarios.js';
import { neonOptionsOf, startStandIn } from './stand-ins.js';

export interface ProbeRow extends ProbeOutcome {
  scenario: string;
  mode: FaultMode;
  /** The armed fault met its statement (a scenario whose statement never came proves nothing). */
  fired: boolean;
}

export interface ProbeReport {
  driver: Driver;
  rows: ProbeRow[];
  /** `probe: driver=… scenarios=… held=… violations=… unfired=…` */
  line: string;
  failed: boolean;
}

/**
 * A slow answer comes this late; an unanswered one is cut off by the client after QUERY_TIMEOUT_MS:
 * far enough apart that a loaded machine does not turn a slow answer into an unknown one.
 */
const SLOW_MS = 200;
const QUERY_TIMEOUT_MS = 2_500;

export async function runProbe(options: {
  driver: Driver;
  databaseUrl?: string;
  progress?: (line: string) => void;
}): Promise<ProbeReport> {
  const { driver } = options;
  const database = options.databaseUrl
    ? { url: options.databaseUrl, stop: async () => {} }
    : await resolveTestDatabase();
  const schema = `probe_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Pool({ connectionString: database.url, max: 2 });
  admin.on('error', () => {});
  const standIn = await startStandIn(driver, database.url);
  const { connection } = standIn;
  const db = connect({
    connectionString: connection.connectionString,
    driver,
    neon: neonOptionsOf(connection),
    max: 2,
    queryTimeoutMs: QUERY_TIMEOUT_MS,
    connectionTimeoutMs: 10_000,
  });
  const rows: ProbeRow[] = [];
  try {
    const direct = connect({ connectionString: database.url });
    await migrate(direct, { schema });
    await direct.close();
    const arm = (mode: FaultMode, match: string | RegExp) =>
      standIn.faults.inject({ mode, match, delayMs: mode === 'slow' ? SLOW_MS : 5_000 });
    const quiet = async () => {
      for (let waited = 0; standIn.faults.holding > 0 && waited < 30_000; waited += 20) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const ctx = { db, faults: standIn.faults, admin, schema, arm, quiet };
    for (const scenario of SCENARIOS) {
      if (scenario.batchOnly && driver !== 'neon-http') continue;
      for (const mode of FAULT_MODES) {
        await admin.query(`truncate "${schema}".jobs, "${schema}".job_steps, "${schema}".signals`);
        standIn.faults.clear();
        const before = standIn.faults.counts()[mode];
        arm(mode, scenario.match);
        const outcome = await scenario
          .run(ctx, mode)
          .catch((err: unknown): ProbeOutcome => ({ answer: 'threw', held: false, why: (err as Error).message }));
        const fired = standIn.faults.counts()[mode] > before;
        standIn.faults.clear();
        await quiet(); // nothing held over into the next scenario
        rows.push({ scenario: scenario.name, mode, fired, ...outcome });
        options.progress?.(`${scenario.name} / ${mode}: ${outcome.answer}${outcome.held ? '' : ` — ${outcome.why}`}`);
      }
    }
  } finally {
    await db.close();
    await standIn.close();
    await admin.query(`drop schema if exists "${schema}" cascade`).catch(() => {});
    await admin.end();
    await database.stop();
  }
  const violations = rows.filter((r) => !r.held).length;
  const unfired = rows.filter((r) => !r.fired).length;
  const line = `probe: driver=${driver} scenarios=${rows.length} held=${rows.length - violations} violations=${violations} unfired=${unfired}`;
  return { driver, rows, line, failed: violations > 0 || unfired > 0 };
}

/** The report as a markdown table: an operation per row, a fault per column, what the caller heard. */
export function probeTable(report: ProbeReport): string {
  const scenarios = [...new Set(report.rows.map((r) => r.scenario))];
  const head = `| ${report.driver} | ${FAULT_MODES.join(' | ')} |\n| --- |${FAULT_MODES.map(() => ' --- |').join('')}`;
  const body = scenarios.map((scenario) => {
    const cells = FAULT_MODES.map((mode) => {
      const row = report.rows.find((r) => r.scenario === scenario && r.mode === mode);
      if (!row) return '';
      return `${row.answer === 'ok' ? 'ok' : `\`${row.answer}\``}${row.held && row.fired ? '' : ' **✗**'}`;
    });
    return `| ${scenario} | ${cells.join(' | ')} |`;
  });
  return [head, ...body].join('\n');
}
