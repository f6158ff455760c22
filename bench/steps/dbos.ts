import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Classes, RunJob } from './measure.js';

/** The statements DBOS 5 sends around a step (read off the texts it sends). */
export const DBOS_CLASSES: Classes = [
  ['check cancelled', /^SELECT status\b[\s\S]*workflow_status/i],
  ['read output', /^SELECT[\s\S]*operation_outputs/i],
  ['lock workflow', /^SELECT owner_xid\b[\s\S]*FOR NO KEY UPDATE/i],
  ['record output', /^INSERT INTO \S*operation_outputs/i],
  ['begin/commit', /^(BEGIN|COMMIT)\b/i],
];

/** The slice of DBOS Transact's API this bench uses (v5: DBOS.setConfig, registerWorkflow, launch, runStep). */
interface Dbos {
  setConfig(config: Record<string, unknown>): void;
  launch(): Promise<void>;
  shutdown(): Promise<void>;
  registerWorkflow<A extends unknown[], R>(
    fn: (...args: A) => Promise<R>,
    config: { name: string },
  ): (...args: A) => Promise<R>;
  runStep<R>(fn: () => Promise<R>, config: { name: string }): Promise<R>;
}
type QueryProto = { query: (...args: unknown[]) => unknown };

/** Where `npm run bench:steps` looks for DBOS Transact unless DBOS_DIR says otherwise. */
export const DBOS_DIR_DEFAULT = '/tmp/dbos-bench';

/** The command that installs DBOS Transact in `dir`, where `npm run bench:steps` looks for it (not a dependency of this repository). */
export const dbosInstallCommand = (dir: string) =>
  `mkdir -p ${dir} && cd ${dir} && npm init -y && npm install @dbos-inc/dbos-sdk@5`;

/** DBOS Transact is not installed where the bench looks: the run goes on without DBOS's rows, and says so. */
export class DbosNotInstalled extends Error {
  /** The reason as the report states it. */
  readonly short: string;
  constructor(dir: string) {
    const install = dbosInstallCommand(dir);
    super(
      `DBOS Transact is not installed in ${dir}, so this run has no DBOS rows to compare with. Install it (outside this repository) with\n  ${install}\nthen run npm run bench:steps again (DBOS_DIR=<folder> to use another folder).`,
    );
    this.name = 'DbosNotInstalled';
    this.short = `not installed in ${dir} (install: ${install})`;
  }
}

/**
 * DBOS Transact from its own install in `dir` (`npm install @dbos-inc/dbos-sdk` there; not a
 * dependency of this repo; else DbosNotInstalled), launched once in this process, its system database at `url`. Two
 * workflows: N steps through DBOS.runStep, and the same bodies called directly.
 * Statements are counted on the node-postgres copy DBOS loads (its Client.prototype.query).
 */
export async function dbosRunner(
  dir: string,
  url: string,
): Promise<{ run: RunJob; version: string; close(): Promise<void> }> {
  const installed = join(dir, 'node_modules/@dbos-inc/dbos-sdk');
  if (!existsSync(installed)) throw new DbosNotInstalled(dir);
  const require = createRequire(join(dir, 'package.json'));
  const { DBOS } = require('@dbos-inc/dbos-sdk') as { DBOS: Dbos };
  const { version } = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as { version: string };
  const client = (require('pg') as { Client: { prototype: QueryProto } }).Client.prototype;

  const body = async () => {};
  // Timed inside the workflow function, as skiplock's handler is; the statements of the whole call are counted.
  const timed = async (loop: () => Promise<void>) => {
    const started = performance.now();
    await loop();
    return performance.now() - started;
  };
  const durableWf = DBOS.registerWorkflow(
    (n: number) =>
      timed(async () => {
        for (let i = 0; i < n; i++) await DBOS.runStep(body, { name: `s${i}` });
      }),
    { name: 'bench_steps_durable' },
  );
  const directWf = DBOS.registerWorkflow(
    (n: number) =>
      timed(async () => {
        for (let i = 0; i < n; i++) await body();
      }),
    { name: 'bench_steps_direct' },
  );
  DBOS.setConfig({
    name: 'skiplock-steps-bench',
    systemDatabaseUrl: url,
    applicationVersion: '0.1.0',
    logLevel: 'error',
  });
  await DBOS.launch();

  return {
    version,
    async run(n, durable) {
      const texts: string[] = [];
      const original = client.query;
      client.query = function (this: unknown, ...args: unknown[]) {
        const first = args[0];
        texts.push(typeof first === 'string' ? first : String((first as { text?: string })?.text ?? ''));
        return original.apply(this, args);
      };
      try {
        return { ms: await (durable ? durableWf : directWf)(n), texts };
      } finally {
        client.query = original;
      }
    },
    close: () => DBOS.shutdown(),
  };
}
