/**
 * `npm run bundle-report`: each deployable function bundled as serverless.yml bundles it
 * (esbuild, minified ESM for Node 22, @aws-sdk/* external), once per driver, and the cold import
 * of the worker's pg bundle beside a bare handler's (median of 7 fresh `node` processes, the
 * bench's method). `--json` for scripts; `--write` also writes docs/bundle-sizes.md, the page every
 * other page quotes its bundle sizes from (scripts/bundle-figures.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleFunction, coldImportMs, WORKER_BUDGET } from './bundle.js';
import {
  BUNDLE_SIZES_PAGE,
  BUNDLED_DRIVERS,
  BUNDLED_FUNCTIONS,
  measureBundles,
  recordOf,
  renderBundleSizes,
} from './bundle-figures.js';

const RUNS = 7;

const sizes = await measureBundles();
if (process.argv.includes('--write')) {
  writeFileSync(new URL(`../${BUNDLE_SIZES_PAGE}`, import.meta.url), renderBundleSizes(recordOf(sizes)));
  console.error(`wrote ${BUNDLE_SIZES_PAGE}`);
}

const dir = mkdtempSync(join(tmpdir(), 'skiplock-bundle-report-'));
let coldImport: { worker: number; bare: number };
try {
  const worker = join(dir, 'worker.mjs');
  const bare = join(dir, 'bare.mjs');
  writeFileSync(worker, await bundleFunction('worker', 'pg'));
  writeFileSync(bare, 'export const handler = async () => ({ ok: true });\n');
  coldImport = { worker: coldImportMs(worker, RUNS), bare: coldImportMs(bare, RUNS) };
} finally {
  rmSync(dir, { recursive: true, force: true });
}

if (process.argv.includes('--json')) {
  console.log(JSON.stringify({ ...sizes, cold_import_ms: coldImport }));
} else {
  const budgetKb = WORKER_BUDGET.bytes / 1024;
  const kb = (n: number) => `${(n / 1024).toFixed(0)} KiB`.padStart(9);
  console.log(
    `function      ${BUNDLED_DRIVERS.map((d) => d.padStart(9)).join(' ')}   (minified, @aws-sdk external; worker budget ${budgetKb} KB, cold import ${WORKER_BUDGET.coldImportMs} ms)`,
  );
  for (const fn of BUNDLED_FUNCTIONS) {
    console.log(`${fn.padEnd(12)}  ${BUNDLED_DRIVERS.map((d) => kb(sizes[fn][d])).join(' ')}`);
  }
  const workerBytes = sizes.worker.pg;
  const over = (exceeded: boolean) => (exceeded ? '  OVER BUDGET' : '');
  console.log(
    `worker (pg): ${workerBytes} bytes of ${WORKER_BUDGET.bytes}${over(workerBytes > WORKER_BUDGET.bytes)}; ` +
      `cold import ${coldImport.worker} ms of ${WORKER_BUDGET.coldImportMs}${over(coldImport.worker > WORKER_BUDGET.coldImportMs)} ` +
      `(bare handler ${coldImport.bare} ms; median of ${RUNS} fresh node ${process.version} processes)`,
  );
}
