import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { bundleFunction, WORKER_BUDGET } from '../../scripts/bundle.js';

// The worker's cold start pays for every byte of its bundle. Size only: its cold import time is
// printed by `npm run bundle-report` and the bench, a timing no test asserts.
//
// The target is 350 KB (WORKER_BUDGET, which bundle-report prints against) and it is not met. With
// zod/mini in the app's kinds and in skiplock (zod 34 KB), pg (85 KB) and drizzle (94 KB, of which a
// thin executor would keep ~10) leave too little for skiplock's worker, its statements and croner
// (27 KB). Until the driver path sheds drizzle, this guards today's size: a change that grows the
// worker past 380 KiB fails here.
const TODAY_KIB = 380;

describe('worker bundle budget', () => {
  it(`bundles the pg worker (as serverless.yml does) in at most ${TODAY_KIB} KiB minified`, async () => {
    expect(WORKER_BUDGET.bytes).toBe(358_400);
    const bytes = (await bundleFunction('worker', 'pg')).byteLength;
    expect(bytes, `worker bundle is ${bytes} bytes; npm run bundle-report lists every function`).toBeLessThanOrEqual(
      TODAY_KIB * 1024,
    );
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
