/**
 * The committed results of the benchmarks, one JSON file per command beside the page it renders:
 * the source of truth for every figure of bench/RESULTS*.md, docs/performance.md and the figures
 * quoted elsewhere in the docs (test/unit/perf-figures.test.ts compares them). A `--quick` run
 * writes `….quick.json` beside it, which is not committed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const RESULT_FILES = {
  /** `npm run bench`: throughput against graphile-worker, pg-boss and the raw floor, and every phase after it. */
  bench: 'bench/RESULTS.json',
  /** The soak phase (`npm run bench -- --soak`, or `-- --soak-only`): claims while VACUUM lags. */
  soak: 'bench/RESULTS.soak.json',
  /** `npm run bench:serverless`: nudge latency, a burst drained with fan-out, K = 1..32, linger. */
  serverless: 'bench/RESULTS.serverless.json',
  /** `npm run bench:steps`: a durable step's cost per driver, beside DBOS Transact. */
  steps: 'bench/RESULTS.steps.json',
  /** `npm run bench:idle -- --write`: a simulated idle day on Lambda and Vercel. */
  idle: 'bench/RESULTS.idle.json',
} as const;
export type ResultSource = keyof typeof RESULT_FILES;
export const RESULT_SOURCES = Object.keys(RESULT_FILES) as ResultSource[];

/** The command that writes each file, as the docs name it. */
export const RESULT_COMMANDS: Record<ResultSource, string> = {
  bench: 'npm run bench',
  soak: 'npm run bench -- --soak',
  serverless: 'npm run bench:serverless',
  steps: 'npm run bench:steps',
  idle: 'npm run bench:idle -- --write',
};

/** Where a run writes its JSON: the committed file, or its `.quick` sibling for a `--quick` run. */
export function resultPath(source: ResultSource, quick = false): string {
  return quick ? RESULT_FILES[source].replace(/\.json$/, '.quick.json') : RESULT_FILES[source];
}

/** Writes a run's record as the committed files hold it: two-space JSON and a final newline. */
export function writeResult(path: string, record: unknown): void {
  writeFileSync(path, `${JSON.stringify(record, null, 2)}\n`);
}

/** Every committed record, read from the repository at `root`. */
export function readResults(root: string): Record<ResultSource, Record<string, unknown>> {
  return Object.fromEntries(
    RESULT_SOURCES.map((source) => [source, JSON.parse(readFileSync(join(root, RESULT_FILES[source]), 'utf8'))]),
  ) as Record<ResultSource, Record<string, unknown>>;
}

/** The date (YYYY-MM-DD, UTC) a run records. */
export const today = () => new Date().toISOString().slice(0, 10);
