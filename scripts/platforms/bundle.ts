// Bundles a platform app the way its own tooling does: a Worker with wrangler itself; a Deno app with
// esbuild (as `deno bundle` and Deno Deploy's builds do): one minified ESM file for the neon-http
// driver, the other drivers' packages folded away (db/connect-lazy.ts), Node's built-ins left to
// the runtime's Node compatibility.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const repo = fileURLToPath(new URL('../..', import.meta.url));

export interface PlatformBundle {
  code: string;
  bytes: number;
  gzipBytes: number;
}

/**
 * A Worker as `wrangler deploy` uploads it (`--dry-run --outdir`): wrangler's own esbuild, its
 * nodejs_compat handling, the config's define and minify.
 */
export async function bundleWorker(config: string): Promise<PlatformBundle> {
  const outdir = mkdtempSync(join(tmpdir(), 'skiplock-wrangler-'));
  try {
    await promisify(execFile)(
      join(repo, 'node_modules/.bin/wrangler'),
      ['deploy', '--dry-run', '--outdir', outdir, '--config', config],
      { cwd: repo, env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' }, timeout: 120_000 },
    );
    const file = readdirSync(outdir).find((name) => name.endsWith('.js'));
    if (!file) throw new Error(`wrangler wrote no bundle to ${outdir}`);
    const code = readFileSync(join(outdir, file), 'utf8');
    return { code, bytes: Buffer.byteLength(code), gzipBytes: gzipSync(code).length };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

/** A Deno (or Node) app: esbuild, as `deno bundle` and Deno Deploy's builds do. */
export async function bundlePlatformApp(
  entry: string,
  driver: 'neon-http' | 'pg' = 'neon-http',
): Promise<PlatformBundle> {
  const result = await build({
    entryPoints: [entry],
    absWorkingDir: repo,
    tsconfig: `${repo}/tsconfig.json`,
    bundle: true,
    minify: true,
    format: 'esm',
    write: false,
    logLevel: 'silent',
    platform: 'node',
    target: 'es2022',
    define: {
      'process.env.SKIPLOCK_BUNDLE_DRIVER': JSON.stringify(driver),
      'process.env.SKIPLOCK_BUNDLE_WEBSOCKET': '"global"',
    },
    // Optional peers the platform adapters never load (they pass waitUntil and read no AWS secret).
    external: ['node:*', '@vercel/functions', '@aws-sdk/*', 'pg-native', '@opentelemetry/*'],
    banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  });
  const code = result.outputFiles[0]?.text ?? '';
  return { code, bytes: Buffer.byteLength(code), gzipBytes: gzipSync(code).length };
}
