import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleFunction } from '../../scripts/bundle.js';
import { percentile, round } from './figures.js';

/**
 * The part of a Lambda cold start this machine can measure: importing the packaged worker bundle
 * (pg driver, SDK external) in a fresh Node process, median of `runs` (as `npm run bench` does).
 * Lambda adds its own sandbox and runtime start, which no local run shows.
 */
export async function workerColdImportMs(runs = 5): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'skiplock-bench-serverless-'));
  try {
    const file = join(dir, 'worker.mjs');
    writeFileSync(file, await bundleFunction('worker', 'pg'));
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const run = spawnSync(
        process.execPath,
        ['-e', `const t=performance.now();import(${JSON.stringify(file)}).then(()=>console.log(performance.now()-t))`],
        { encoding: 'utf8' },
      );
      times.push(Number(run.stdout.trim()));
    }
    return round(percentile(times, 0.5));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
