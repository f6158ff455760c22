// `npm run vendor` without a build: what it refuses, and the steps it prints for each state of the
// app's package.json and package-lock.json (test/e2e/next-app.test.ts runs the whole script and
// deploys the result). Then npm's side of an upgrade under the same file name, which those steps
// describe: offline, a package with no dependencies and npm caches of its own.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { type App, appOf, ignoredBy, integrityOf, nextSteps, VendorError } from '../../scripts/vendor-app.js';

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, '../..');
const root = mkdtempSync(join(tmpdir(), 'skiplock-vendor-test-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let folders = 0;
/** A fresh folder holding the given files. */
function folder(files: Record<string, string> = {}): string {
  const dir = join(root, `app-${++folders}`);
  mkdirSync(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}
const refusal = (arg: string | undefined, cwd = root) => {
  try {
    appOf(arg, cwd);
  } catch (err) {
    if (err instanceof VendorError) return err.message;
    throw err;
  }
  throw new Error(`appOf(${arg}) accepted it`);
};

describe('npm run vendor: the app folder', () => {
  it('refuses a missing argument, a missing folder, a file, skiplock itself, and a folder without a valid package.json', () => {
    expect(refusal(undefined)).toMatch(/^usage: npm run vendor -- <your app's folder>/);
    expect(refusal('no-such-app')).toBe(
      `${join(root, 'no-such-app')} is not a folder: give your app's folder, the one with its package.json`,
    );
    const empty = folder({ 'notes.txt': '' });
    expect(refusal(join(empty, 'notes.txt'))).toMatch(/notes\.txt is not a folder/);
    expect(refusal('.', repo)).toBe(`${repo} is skiplock's own folder: give your app's folder`);
    expect(refusal(empty)).toBe(
      `${empty} has no package.json: give your app's folder, the one with its package.json (a new app: npm init -y)`,
    );
    expect(refusal(folder({ 'package.json': '{"name": ' }))).toMatch(/package\.json is not valid JSON: fix it/);
    expect(refusal(folder({ 'package.json': '[]' }))).toMatch(/package\.json does not hold a JSON object/);
  });

  it('resolves a relative folder from where npm run was started', () => {
    const where = folder();
    const dir = folder({ 'package.json': '{"name":"my-app"}' });
    expect(appOf(`../app-${folders}`, where)).toEqual({
      dir,
      pkg: { name: 'my-app' },
    });
  });

  it('the script itself says what is wrong, exits 1 and prints no stack, before packing anything', async () => {
    const empty = folder();
    const failure = await run(process.execPath, ['--import', 'tsx', 'scripts/vendor.ts', empty], {
      cwd: repo,
      env: { ...process.env, INIT_CWD: repo },
    }).then(
      () => undefined,
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expect(failure).toMatchObject({ code: 1, stdout: '' });
    expect(failure?.stderr.trim()).toBe(
      `${empty} has no package.json: give your app's folder, the one with its package.json (a new app: npm init -y)`,
    );
  });
});

describe('npm run vendor: the steps it prints', () => {
  const vendored = 'vendor/skiplock-0.1.0.tgz';
  const bytes = Buffer.from('the packed tarball');
  const appWith = (pkg: object, lockedIntegrity?: string): App => {
    const dir = folder({ 'package.json': JSON.stringify(pkg) });
    if (lockedIntegrity) {
      const lock = {
        packages: { 'node_modules/skiplock': { resolved: `file:${vendored}`, integrity: lockedIntegrity } },
      };
      writeFileSync(join(dir, 'package-lock.json'), JSON.stringify(lock));
    }
    return appOf(dir, root);
  };

  it('a first install: the tarball by a path inside the app, with the peers the app lacks, then commit', () => {
    const steps = nextSteps(appWith({ name: 'my-app' }), vendored, integrityOf(bytes), '../my-app');
    expect(steps.slice(0, 4)).toEqual([
      'now, in the app:',
      '  cd ../my-app',
      '  npm install ./vendor/skiplock-0.1.0.tgz zod drizzle-orm',
      '  git add vendor package.json package-lock.json',
    ]);
    expect(steps.join('\n')).toContain('"skiplock": "file:vendor/skiplock-0.1.0.tgz", a path inside the app');
    const withPeers = appWith({ dependencies: { zod: '^4.0.0' }, devDependencies: { 'drizzle-orm': '^0.45.0' } });
    expect(nextSteps(withPeers, vendored, integrityOf(bytes))[1]).toBe('  npm install ./vendor/skiplock-0.1.0.tgz');
    // An app that installed from a clone beside it moves to vendor/.
    const besideIt = appWith(
      { dependencies: { skiplock: 'file:../skiplock/skiplock-0.1.0.tgz', zod: '4', 'drizzle-orm': '0' } },
      'sha512-x',
    );
    expect(nextSteps(besideIt, vendored, integrityOf(bytes))[1]).toBe('  npm install ./vendor/skiplock-0.1.0.tgz');
  });

  it('the same bytes already installed: nothing to install; new bytes under the same name: install it again by name', () => {
    const pkg = { dependencies: { skiplock: `file:${vendored}`, zod: '^4.0.0', 'drizzle-orm': '^0.45.0' } };
    expect(nextSteps(appWith(pkg, integrityOf(bytes)), vendored, integrityOf(bytes))).toEqual([
      'package.json and package-lock.json already name these bytes: nothing to install.',
    ]);
    const upgrade = nextSteps(
      appWith(pkg, integrityOf(Buffer.from('the previous build'))),
      vendored,
      integrityOf(bytes),
    );
    expect(upgrade[1]).toBe('  npm install ./vendor/skiplock-0.1.0.tgz');
    expect(upgrade.join(' ')).toMatch(/records the previous tarball.*A bare npm install keeps the old integrity/);
    expect(upgrade.join(' ')).toContain('fails with EINTEGRITY');
  });

  it('names the .gitignore rule that would keep the tarball out of a clone, and none once it is let through', async () => {
    const dir = folder({ '.gitignore': 'node_modules/\n*.tgz\n' });
    await run('git', ['init', '-q'], { cwd: dir });
    expect(await ignoredBy(dir, vendored)).toBe('.gitignore:2:*.tgz');
    writeFileSync(join(dir, '.gitignore'), 'node_modules/\n*.tgz\n!/vendor/*.tgz\n');
    expect(await ignoredBy(dir, vendored)).toBeUndefined();
    expect(await ignoredBy(folder(), vendored)).toBeUndefined(); // not a git repository
  });
});

describe("npm's side of re-vendoring under the same file name", () => {
  it('the lockfile keeps the old integrity until npm install names the file: a clean install fails, a warm cache installs the old bytes', async () => {
    const pkg = folder({ 'package.json': '{"name":"tiny","version":"1.0.0"}', 'index.js': 'export const v = 1;\n' });
    const app = folder({ 'package.json': '{"name":"my-app","private":true}' });
    const npm = (args: string[], cache: string) =>
      run(
        'npm',
        [...args, `--cache=${join(root, cache)}`, '--offline', '--no-audit', '--no-fund', '--loglevel=error'],
        {
          cwd: app,
          env: { ...process.env, npm_config_update_notifier: 'false' },
        },
      );
    const packInto = () =>
      run('npm', ['pack', '--pack-destination', join(app, 'vendor'), '--loglevel=error'], { cwd: pkg });
    const locked = () =>
      JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8')).packages['node_modules/tiny'].integrity;
    const installedBytes = () => readFileSync(join(app, 'node_modules/tiny/index.js'), 'utf8');
    const tarball = () => readFileSync(join(app, 'vendor/tiny-1.0.0.tgz'));

    mkdirSync(join(app, 'vendor'));
    await packInto();
    await npm(['install', './vendor/tiny-1.0.0.tgz'], 'warm');
    const first = locked();
    expect(first).toBe(integrityOf(tarball()));
    expect(JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')).dependencies.tiny).toBe(
      'file:vendor/tiny-1.0.0.tgz',
    );

    writeFileSync(join(pkg, 'index.js'), 'export const v = 2;\n');
    await packInto();
    await npm(['install'], 'warm');
    expect(locked()).toBe(first); // a bare install keeps the old integrity
    await npm(['ci'], 'warm');
    expect(installedBytes()).toContain('v = 1'); // served from the cache by that integrity
    await expect(npm(['ci'], 'clean-1')).rejects.toMatchObject({ stderr: expect.stringContaining('EINTEGRITY') });

    await npm(['install', './vendor/tiny-1.0.0.tgz'], 'warm');
    expect(locked()).toBe(integrityOf(tarball()));
    await npm(['ci'], 'clean-2');
    expect(installedBytes()).toContain('v = 2');
  });
});
