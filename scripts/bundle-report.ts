/**
 * `npm run bundle-report`: each deployable function bundled as serverless.yml bundles it
 * (esbuild, minified ESM for Node 22, @aws-sdk/* external), once per driver, and the cold import
 * of the worker's pg bundle beside a bare handler's (median of 7 fresh `node` processes, the
 * bench's method). `--json` for scripts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleFunction, coldImportMs, WORKER_BUDGET } from './bundle.js';

const FUNCTIONS = ['worker', 'enqueue', 'replay', 'control', 'signal', 'console', 'maintenance'] as const;
const DRIVERS = ['pg', 'neon-ws', 'neon-http'] as const;
const RUNS = 7;

const sizes: Record<string, Record<string, number>> = {};
let workerPg: Uint8Array | undefined;
for (const fn of FUNCTIONS) {
  sizes[fn] = {};
  for (const driver of DRIVERS) {
    const bundle = await bundleFunction(fn, driver);
    if (fn === 'worker' && driver === 'pg') workerPg = bundle;
    (sizes[fn] as Record<string, number>)[driver] = bundle.byteLength;
  }
}

const dir = mkdtempSync(join(tmpdir(), 'skiplock-bundle-report-'));
let coldImport: { worker: number; bare: number };
try {
  const worker = join(dir, 'worker.mjs');
  const bare = join(dir, 'bare.mjs');
  writeFileSync(worker, workerPg ?? new Uint8Array());
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
    `function      ${DRIVERS.map((d) => d.padStart(9)).join(' ')}   (minified, @aws-sdk external; worker budget ${budgetKb} KB, cold import ${WORKER_BUDGET.coldImportMs} ms)`,
  );
  for (const fn of FUNCTIONS) {
    console.log(`${fn.padEnd(12)}  ${DRIVERS.map((d) => kb(sizes[fn]?.[d] ?? 0)).join(' ')}`);
  }
  const workerBytes = sizes.worker?.pg ?? 0;
  const over = (exceeded: boolean) => (exceeded ? '  OVER BUDGET' : '');
  console.log(
    `worker (pg): ${workerBytes} bytes of ${WORKER_BUDGET.bytes}${over(workerBytes > WORKER_BUDGET.bytes)}; ` +
      `cold import ${coldImport.worker} ms of ${WORKER_BUDGET.coldImportMs}${over(coldImport.worker > WORKER_BUDGET.coldImportMs)} ` +
      `(bare handler ${coldImport.bare} ms; median of ${RUNS} fresh node ${process.version} processes)`,
  );
}
