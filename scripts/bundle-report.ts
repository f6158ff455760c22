/**
 * `npm run bundle-report`: each deployable function bundled as serverless.yml bundles it
 * (esbuild, minified ESM for Node 22, @aws-sdk/* external), once per driver. `--json` for scripts.
 */
import { bundleFunction } from './bundle.js';

const FUNCTIONS = ['worker', 'enqueue', 'replay', 'control', 'console', 'maintenance'] as const;
const DRIVERS = ['pg', 'neon-ws', 'neon-http'] as const;

const sizes: Record<string, Record<string, number>> = {};
for (const fn of FUNCTIONS) {
  sizes[fn] = {};
  for (const driver of DRIVERS) {
    (sizes[fn] as Record<string, number>)[driver] = (await bundleFunction(fn, driver)).byteLength;
  }
}

if (process.argv.includes('--json')) {
  console.log(JSON.stringify(sizes));
} else {
  const kb = (n: number) => `${(n / 1024).toFixed(0)} KiB`.padStart(9);
  console.log(
    `function      ${DRIVERS.map((d) => d.padStart(9)).join(' ')}   (minified, @aws-sdk external; worker budget 400 KB)`,
  );
  for (const fn of FUNCTIONS) {
    console.log(`${fn.padEnd(12)}  ${DRIVERS.map((d) => kb(sizes[fn]?.[d] ?? 0)).join(' ')}`);
  }
}
