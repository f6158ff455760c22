import { type Row, renderBreakdown, renderTable } from './measure.js';

/** What `npm run bench:steps` records in bench/RESULTS.steps.json; RESULTS.steps.md is rendered from it. */
export interface StepsRecord {
  /** YYYY-MM-DD (UTC). */
  date: string;
  serverVersion: string;
  node: string;
  /** Pairs measured per line. */
  reps: number;
  /** DBOS Transact's version, or why it did not run (then the record has no DBOS rows). */
  dbos: { version?: string; error?: string };
  rows: Row[];
}

/** bench/RESULTS.steps.md. */
export function renderStepsPage(record: StepsRecord): string {
  return [
    '# Durable steps: what a step costs',
    '',
    `Run: ${record.date} by \`npm run bench:steps\`; every figure below is in [RESULTS.steps.json](RESULTS.steps.json). Postgres ${record.serverVersion}, Node ${record.node}, client and server on the same 2-core machine; ${record.reps} pairs per line. ms = the median over pairs of (durable − direct) time inside the handler (DBOS: the workflow function); statements counted at the client. neon-ws and neon-http run through the local stand-ins of 'skiplock/testing': compare the drivers with each other, not with Neon's latency.`,
    '',
    `DBOS Transact: ${record.dbos.version ?? `not run: ${record.dbos.error}`} (DBOS.runStep in a long-lived process, on the same Postgres).`,
    '',
    renderTable(record.rows),
    '',
    'Extra statements per 100-step job, by kind:',
    '',
    renderBreakdown(record.rows),
    '',
  ].join('\n');
}
