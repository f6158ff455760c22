import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { bundleFunction, WORKER_BUDGET } from '../../scripts/bundle.js';

// The worker's cold start pays for every byte of its bundle. Size only: its cold import time is
// printed by `npm run bundle-report` and the bench, a timing no test asserts.
//
// The budget is 350 KB (WORKER_BUDGET, which bundle-report prints against). What keeps the pg worker
// under it: zod/mini in the app's kinds and in skiplock, and a pool that runs skiplock's statements
// without a Drizzle database (db/drivers/pg-lean.ts; Drizzle's query builders are ~84 KB).
describe('worker bundle budget', () => {
  it('bundles the pg worker (as serverless.yml does) within the 350 KB budget, minified', async () => {
    expect(WORKER_BUDGET.bytes).toBe(358_400);
    const bundle = await bundleFunction('worker', 'pg');
    expect(
      bundle.byteLength,
      `worker bundle is ${bundle.byteLength} bytes; npm run bundle-report lists every function`,
    ).toBeLessThanOrEqual(WORKER_BUDGET.bytes);
    // Drizzle's database (its select builder) stays out: only skiplock's own statements run here.
    expect(new TextDecoder().decode(bundle)).not.toContain('PgSelectQueryBuilder');
  });
});

// The docs quote what `npm run bundle-report` prints; a figure more than 3 KiB off what the same
// build gives today fails here, naming the page to update from the tool's output.
describe('bundle sizes quoted in the docs', () => {
  const kib = async (fn: string, driver: string) => Math.round((await bundleFunction(fn, driver)).byteLength / 1024);
  const quoted = (page: string, pattern: RegExp) => {
    const match = pattern.exec(readFileSync(new URL(`../../docs/${page}`, import.meta.url), 'utf8'));
    if (!match) throw new Error(`docs/${page} no longer quotes ${pattern}`);
    return match.slice(1).map(Number);
  };
  it('deploy-lambda.md and console.md quote today’s sizes (within 3 KiB)', async () => {
    const [workerPg, workerNeon] = quoted(
      'deploy-lambda.md',
      /the worker is\s+(\d+) KiB with `pg`, (\d+) KiB with a Neon driver/,
    );
    const [consolePg, controlPg] = quoted(
      'console.md',
      /bundle is (\d+) KiB with the pg driver \(control: (\d+) KiB\)/,
    );
    const actual = {
      worker: await kib('worker', 'pg'),
      workerNeon: await kib('worker', 'neon-http'),
      console: await kib('console', 'pg'),
      control: await kib('control', 'pg'),
    };
    const off = (doc: number | undefined, now: number) => Math.abs((doc ?? 0) - now) > 3;
    expect(
      { deployLambda: [workerPg, workerNeon], console: [consolePg, controlPg] },
      `npm run bundle-report prints ${JSON.stringify(actual)}: update the figures in the docs`,
    ).toEqual({
      deployLambda: [
        off(workerPg, actual.worker) ? actual.worker : workerPg,
        off(workerNeon, actual.workerNeon) ? actual.workerNeon : workerNeon,
      ],
      console: [
        off(consolePg, actual.console) ? actual.console : consolePg,
        off(controlPg, actual.control) ? actual.control : controlPg,
      ],
    });
  });
});
