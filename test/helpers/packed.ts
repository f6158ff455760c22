import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { inject } from 'vitest';

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, '../..');

/** Offline-friendly npm (the dependencies are in the npm cache after `npm ci`). */
export const npm = (args: string[], cwd: string) =>
  run('npm', [...args, '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], {
    cwd,
    timeout: 180_000,
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });

/**
 * The package as `npm pack` makes it, once per run for every test file that installs it: `npm pack`
 * runs prepack (the build, which empties dist/ first), so two at once would tear each other's
 * output. The first file to take the lock packs; the others wait for its tarball (or its failure).
 */
export async function packedTarball(): Promise<string> {
  const dir = inject('packDir');
  const tarball = join(dir, 'skiplock.tgz');
  const failed = join(dir, 'failed');
  try {
    mkdirSync(join(dir, 'lock'));
  } catch {
    const deadline = Date.now() + 240_000;
    while (!existsSync(tarball)) {
      if (existsSync(failed)) throw new Error('npm pack failed in another test file');
      if (Date.now() > deadline) throw new Error('npm pack in another test file did not finish in 240 s');
      await delay(200); // polling for another process's file, not waiting out time
    }
    return tarball;
  }
  try {
    const out = join(dir, 'out');
    mkdirSync(out);
    await npm(['pack', '--pack-destination', out], repo);
    renameSync(join(out, readdirSync(out)[0]!), tarball);
    return tarball;
  } catch (err) {
    writeFileSync(failed, String(err));
    throw err;
  }
}
