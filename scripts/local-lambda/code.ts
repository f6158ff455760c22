/**
 * Puts the packaged code where execution environments can run it: each function's .zip unzipped
 * into its own folder, and runtime.ts compiled to plain JavaScript beside them.
 */
import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import type { FunctionSpec } from './template.js';

const run = promisify(execFile);

/**
 * Unzips each function into `codeDir/<function name>` and returns those folders.
 * `codeDir` must sit inside the project: the bundles leave `@aws-sdk/*` out (the Lambda runtime
 * ships it), and ESM resolves such bare imports only from node_modules folders above the
 * importing file — NODE_PATH does not apply to `import`.
 */
export async function unpackFunctions(
  functions: readonly FunctionSpec[],
  codeDir: string,
): Promise<Map<string, string>> {
  const folders = new Map<string, string>();
  await Promise.all(
    functions.map(async (fn) => {
      const folder = join(codeDir, fn.name);
      mkdirSync(folder, { recursive: true });
      await run('unzip', ['-q', '-o', fn.zipFile, '-d', folder]);
      folders.set(fn.name, folder);
    }),
  );
  return folders;
}

/** Compiles runtime.ts (and the types it imports) into one .mjs in `codeDir`; returns its path. */
export async function buildRuntime(codeDir: string): Promise<string> {
  const outfile = join(codeDir, 'runtime.mjs');
  await build({
    entryPoints: [fileURLToPath(new URL('./runtime.ts', import.meta.url))],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'silent',
  });
  return outfile;
}
