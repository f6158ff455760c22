import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleFunction } from '../../scripts/bundle.js';
import { percentile, round } from './figures.js';

/** One fresh Node process importing `file`: milliseconds from before the import to its end. */
function importOnce(file: string): number {
  const run = spawnSync(
    process.execPath,
    ['-e', `const t=performance.now();import(${JSON.stringify(file)}).then(()=>console.log(performance.now()-t))`],
    { encoding: 'utf8' },
  );
  return Number(run.stdout.trim());
}

/**
 * The median import time of each file in a fresh Node process, `runs` of each. One import of each
 * first, not counted (it reads the file and Node's own code from disk); then the files take turns,
 * so a moment of load on the machine falls on all of them alike rather than on one file's whole series.
 */
export function coldImportMs<Name extends string>(files: Record<Name, string>, runs = 11): Record<Name, number> {
  const names = Object.keys(files) as Name[];
  const times = new Map<Name, number[]>(names.map((name) => [name, []]));
  for (const name of names) importOnce(files[name]);
  for (let i = 0; i < runs; i++) for (const name of names) times.get(name)?.push(importOnce(files[name]));
  return Object.fromEntries(names.map((name) => [name, round(percentile(times.get(name) ?? [], 0.5))])) as Record<
    Name,
    number
  >;
}

/**
 * The part of a Lambda cold start this machine can measure: importing the packaged worker bundle
 * (pg driver, SDK external) and a bare handler, each in a fresh Node process (as `npm run bench`
 * does). Lambda adds its own sandbox and runtime start, which no local run shows.
 */
export async function workerColdImport(runs = 11): Promise<{ bytes: number; worker: number; bare: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'skiplock-bench-cold-'));
  try {
    const worker = join(dir, 'worker.mjs');
    const bare = join(dir, 'bare.mjs');
    const built = await bundleFunction('worker', 'pg');
    writeFileSync(worker, built);
    writeFileSync(bare, 'export const handler = async () => ({ ok: true });\n');
    return { bytes: built.byteLength, ...coldImportMs({ worker, bare }, runs) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
