import { spawnSync } from 'node:child_process';
import { build } from 'esbuild';

/**
 * What the worker bundle (pg driver) is held to: its minified size (checked by
 * test/unit/bundle-budget.test.ts) and its cold import, which only the tools measure
 * (`npm run bundle-report`, `npm run bench`): timings are the machine's, not a test's.
 */
export const WORKER_BUDGET = { bytes: 350 * 1024, coldImportMs: 50 } as const;

/**
 * Bundles one deployable function the way serverless.yml does: minified ESM for Node 22,
 * the createRequire banner, @aws-sdk/* external, only `driver`'s packages. Returns the
 * bundle's bytes; writes it to `outfile` when given.
 */
export async function bundleFunction(fn: string, driver: string, outfile?: string): Promise<Uint8Array> {
  const result = await build({
    entryPoints: [`functions/${fn}.ts`],
    bundle: true,
    minify: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    external: ['@aws-sdk/*', 'pg-native'],
    define: {
      'process.env.SKIPLOCK_BUNDLE_DRIVER': JSON.stringify(driver),
      'process.env.SKIPLOCK_BUNDLE_WEBSOCKET': '"global"',
    },
    banner: { js: "import { createRequire } from 'module'; const require = createRequire(import.meta.url);" },
    write: false,
    outfile: outfile ?? `${fn}.mjs`,
  });
  return result.outputFiles[0]?.contents ?? new Uint8Array();
}

/**
 * The cold import of a module file as the bench measures it (phase 7): a fresh
 * `node -e "const t=performance.now();import(file).then(()=>console.log(performance.now()-t))"`,
 * `runs` times; the median in milliseconds, to a tenth.
 */
export function coldImportMs(file: string, runs = 7): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const run = spawnSync(
      process.execPath,
      ['-e', `const t=performance.now();import(${JSON.stringify(file)}).then(()=>console.log(performance.now()-t))`],
      { encoding: 'utf8' },
    );
    const printed = run.stdout.trim();
    const ms = printed === '' ? Number.NaN : Number(printed);
    if (run.status !== 0 || !Number.isFinite(ms)) {
      throw new Error(`importing ${file} failed: ${run.stderr.trim().split('\n').slice(-3).join(' ')}`);
    }
    times.push(ms);
  }
  const sorted = times.sort((a, b) => a - b);
  return Math.round((sorted[Math.floor(sorted.length / 2)] ?? 0) * 10) / 10;
}
