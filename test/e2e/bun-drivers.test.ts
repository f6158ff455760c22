import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';

// Issue #40 §3: the package's core and the node-postgres driver run under Bun (from npm, the `bun`
// devDependency), and the driver smoke set passes there. The same test/drivers files the pg project
// runs on Node, unchanged, run by vitest on Bun's runtime: `bun --bun` makes Bun the runtime of
// vitest and of the workers it forks (each test records process.versions.bun in its meta, through
// test/report-labels.ts). The count to reach comes from `vitest list` on Node, so a file that fails
// to load under Bun, or a test it never collects, shows up as a difference, not as a smaller green run.

const run = promisify(execFile);
const repo = fileURLToPath(new URL('../..', import.meta.url));
const bin = (name: string) => join(repo, 'node_modules/.bin', name);
const reports = mkdtempSync(join(tmpdir(), 'skiplock-bun-drivers-'));
afterAll(() => rmSync(reports, { recursive: true, force: true }));

/**
 * The environment of a nested vitest: this run's database, its own schemas (SKIPLOCK_TEST_RUN: the
 * same files run at the same time in this run's pg project), its JSON report in `report` when given,
 * and none of the variables this run's own vitest and project set.
 */
function nestedEnv(report?: string): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST') && !name.startsWith('SKIPLOCK_TEST_')),
  );
  return {
    ...env,
    TEST_DATABASE_URL: inject('databaseUrl'),
    SKIPLOCK_TEST_RUN: `${process.env.SKIPLOCK_TEST_RUN ?? ''}bun`,
    ...(report ? { SKIPLOCK_TEST_REPORT: report } : {}),
  };
}

interface JsonReport {
  numFailedTests: number;
  numFailedTestSuites: number;
  testResults: {
    name: string;
    status: string;
    message?: string;
    assertionResults: { fullName: string; status: string; failureMessages: string[]; meta: { bun?: string } }[];
  }[];
}

/** The tests the pg project holds in test/drivers, per file, as vitest lists them on Node. */
async function listedOnNode(): Promise<Record<string, number>> {
  const file = join(reports, 'node-list.json');
  await run(process.execPath, [bin('vitest'), 'list', '--project', 'pg', `--json=${file}`, 'test/drivers'], {
    cwd: repo,
    env: nestedEnv(),
    timeout: 240_000,
  });
  const listed = JSON.parse(readFileSync(file, 'utf8')) as { file: string; projectName: string }[];
  const perFile: Record<string, number> = {};
  for (const test of listed.filter((t) => t.projectName === 'pg')) {
    const name = relative(repo, test.file);
    perFile[name] = (perFile[name] ?? 0) + 1;
  }
  return perFile;
}

/**
 * `bun --bun vitest run --project pg test/drivers`, and its JSON report. Two files at once: the fault
 * probe takes ~51 s of the 63–70 s and the other files fit beside it; a third would only open more of
 * Postgres's connections while this run's own files use them too.
 */
async function runOnBun(): Promise<{ report: JsonReport; output: string }> {
  const file = join(reports, 'bun-run.json');
  const args = ['--bun', bin('vitest'), 'run', '--project', 'pg', '--maxWorkers=2', 'test/drivers'];
  const output = await run(bin('bun'), args, {
    cwd: repo,
    env: nestedEnv(file),
    timeout: 400_000,
    maxBuffer: 64 * 1024 * 1024,
  }).then(
    (r) => r.stdout,
    (err: { stdout?: string; stderr?: string; message: string }) =>
      `${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`,
  );
  return { report: JSON.parse(readFileSync(file, 'utf8')) as JsonReport, output };
}

describe('the driver smoke set under Bun', () => {
  it('runs every test of test/drivers on node-postgres in Bun, each passing', { timeout: 420_000 }, async () => {
    const [listed, { report, output }, version] = await Promise.all([
      listedOnNode(),
      runOnBun(),
      run(bin('bun'), ['--version']).then((r) => r.stdout.trim()),
    ]);
    const failures = report.testResults.flatMap((file) => [
      ...(file.status === 'failed' && file.assertionResults.length === 0
        ? [`${relative(repo, file.name)}: ${file.message}`]
        : []),
      ...file.assertionResults
        .filter((test) => test.status !== 'passed')
        .map((test) => `${test.fullName}: ${test.status} ${test.failureMessages.join('\n').slice(0, 500)}`),
    ]);
    expect(failures, output.slice(-2000)).toEqual([]);
    expect([report.numFailedTests, report.numFailedTestSuites]).toEqual([0, 0]);

    const passed: Record<string, number> = {};
    for (const file of report.testResults) {
      const count = file.assertionResults.filter((test) => test.status === 'passed').length;
      if (count > 0) passed[relative(repo, file.name)] = count;
    }
    expect(Object.keys(listed).length).toBeGreaterThan(0);
    expect(passed).toEqual(listed);

    // Each test ran in a worker whose runtime was this Bun.
    const runtimes = new Set(report.testResults.flatMap((file) => file.assertionResults.map((t) => t.meta.bun)));
    expect([...runtimes]).toEqual([version]);
    console.log(
      `bun ${version}: ${Object.values(passed).reduce((a, b) => a + b, 0)} tests of test/drivers passed on pg`,
    );
  });
});
