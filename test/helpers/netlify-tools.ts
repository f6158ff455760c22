// Netlify's own local tooling for test/e2e/init-netlify.test.ts, installed apart from this
// repository: test/fixtures/netlify-tools/ pins @netlify/dev (what `netlify dev` and Netlify's Vite
// plugin run) with TypeScript 5 in a lockfile of its own. Its bundler, zip-it-and-ship-it, parses
// functions with @typescript-eslint/typescript-estree, which resolves the `typescript` package
// nearest to it: inside this repository that is TypeScript 7, which it cannot load. Installed under
// node_modules/.cache/ (ignored by git) with `npm ci`, and again only when the lockfile changes.
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { repo } from './init-app.js';

const run = promisify(execFile);
const source = join(repo, 'test/fixtures/netlify-tools');
const cache = join(repo, 'node_modules/.cache');
const target = join(cache, 'skiplock-netlify-tools');

/** The folder holding the tools and test/fixtures/netlify-tools/serve.mjs, installed if need be. */
export async function netlifyTools(): Promise<string> {
  const lock = readFileSync(join(source, 'package-lock.json'), 'utf8');
  const installedLock = join(target, 'package-lock.json');
  const installed =
    existsSync(join(target, 'node_modules/@netlify/dev/package.json')) &&
    existsSync(installedLock) &&
    readFileSync(installedLock, 'utf8') === lock;
  if (!installed) {
    mkdirSync(cache, { recursive: true });
    // Installed beside, then moved in: a run stopped halfway leaves no half-installed folder behind.
    const staging = mkdtempSync(join(cache, 'skiplock-netlify-tools-'));
    for (const file of ['package.json', 'package-lock.json']) copyFileSync(join(source, file), join(staging, file));
    // No install scripts: the tools' native parts come as prebuilt packages (esbuild's, sharp's).
    await run('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline', '--ignore-scripts', '--loglevel=error'], {
      cwd: staging,
      timeout: 600_000,
      env: { ...process.env, npm_config_update_notifier: 'false' },
    });
    rmSync(target, { recursive: true, force: true });
    renameSync(staging, target);
  }
  copyFileSync(join(source, 'serve.mjs'), join(target, 'serve.mjs'));
  return target;
}
