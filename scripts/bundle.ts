import { build } from 'esbuild';

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
