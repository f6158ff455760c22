/**
 * `npm run vendor -- <app folder>`: packs skiplock (prepack builds dist/) and copies the tarball
 * into <app>/vendor/. The app installs it from there, by a path inside itself
 * ("skiplock": "file:vendor/skiplock-0.1.0.tgz"), and commits vendor/ with its lockfile, so a clone
 * of the app (CI, Vercel's build, a teammate's machine) installs the same bytes
 * (README: "Install into your app"; test/e2e/next-app.test.ts deploys such a clone).
 *
 * It prints the install command rather than running it: a first install names the peers (zod,
 * drizzle-orm) in the same command, and the app's package.json and lockfile change only when the
 * app's owner runs it.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { appOf, ignoredBy, integrityOf, nextSteps, repo, USAGE, VendorError } from './vendor-app.js';

const run = promisify(execFile);

/** `npm pack` into a fresh folder; the build's own output when it fails. */
async function pack(): Promise<{ name: string; bytes: Buffer }> {
  const out = mkdtempSync(join(tmpdir(), 'skiplock-vendor-'));
  try {
    await run('npm', ['pack', '--pack-destination', out, '--loglevel=error'], { cwd: repo, maxBuffer: 16 << 20 });
    const name = readdirSync(out).find((file) => file.endsWith('.tgz'));
    if (!name) throw new VendorError(`npm pack wrote no tarball in ${out}`);
    return { name, bytes: readFileSync(join(out, name)) };
  } catch (err) {
    if (err instanceof VendorError) throw err;
    const { stdout = '', stderr = '' } = err as { stdout?: string; stderr?: string };
    const output = `${stdout}${stderr}`.trim().split('\n').slice(-20).join('\n');
    throw new VendorError(`npm pack failed in ${repo} (did npm ci run there?):\n${output}`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

async function main(args: string[]): Promise<void> {
  if (args.includes('--help') || args.includes('-h')) {
    console.log(USAGE);
    return;
  }
  if (args.length > 1) throw new VendorError(`one app folder, not ${args.length}\n${USAGE}`);
  const cwd = process.env.INIT_CWD ?? process.cwd();
  const app = appOf(args[0], cwd);
  const { name, bytes } = await pack();
  const vendored = `vendor/${name}`;
  const target = join(app.dir, vendored);
  const integrity = integrityOf(bytes);
  const before = existsSync(target) ? integrityOf(readFileSync(target)) : undefined;
  mkdirSync(join(app.dir, 'vendor'), { recursive: true });
  writeFileSync(target, bytes);
  const state = before === undefined ? 'new' : before === integrity ? 'unchanged' : 'replaced: same name, new bytes';
  console.log(`packed skiplock into ${target} (${state}, ${Math.round(bytes.length / 1024)} KiB)`);

  for (const line of nextSteps(app, vendored, integrity, app.dir === cwd ? undefined : args[0])) console.log(line);
  const older = readdirSync(join(app.dir, 'vendor')).filter((file) => /^skiplock-.+\.tgz$/.test(file) && file !== name);
  for (const file of older)
    console.log(`vendor/${file} is an older one: git rm it once package.json names ${vendored}`);
  const rule = await ignoredBy(app.dir, vendored);
  if (rule) {
    console.log(`warning: git ignores ${vendored} (${rule}), so a clone would not have it:`);
    console.log('add the line !/vendor/*.tgz at the end of .gitignore');
  }
}

try {
  await main(process.argv.slice(2));
} catch (err) {
  console.error(err instanceof VendorError ? err.message : `vendor failed: ${(err as Error).message}`);
  process.exit(1);
}
