/**
 * What `npm run vendor` (scripts/vendor.ts) reads and says about the app it vendors skiplock into:
 * the app's folder, what its package.json and package-lock.json name, and the steps left to run.
 * No packing here, so test/e2e/vendor.test.ts runs it without building.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** This clone of skiplock. */
export const repo = resolve(import.meta.dirname, '..');
/** skiplock's required peer dependencies: a first install adds those the app lacks. */
const PEERS = ['zod', 'drizzle-orm'];
export const USAGE = `usage: npm run vendor -- <your app's folder>     e.g. npm run vendor -- ../my-app
packs skiplock into <app>/vendor/ and prints the npm install that makes the app depend on it`;

/** A problem the user fixes: its message is all they see. */
export class VendorError extends Error {}

interface PackageJson {
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

export interface App {
  dir: string;
  pkg: PackageJson;
}

/** The app's folder, from the argument as typed in `cwd` (where `npm run` was started). */
export function appOf(arg: string | undefined, cwd: string): App {
  if (!arg) throw new VendorError(USAGE);
  const dir = resolve(cwd, arg);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new VendorError(`${dir} is not a folder: give your app's folder, the one with its package.json`);
  }
  if (dir === repo) throw new VendorError(`${dir} is skiplock's own folder: give your app's folder`);
  const file = join(dir, 'package.json');
  if (!existsSync(file)) {
    throw new VendorError(
      `${dir} has no package.json: give your app's folder, the one with its package.json (a new app: npm init -y)`,
    );
  }
  let pkg: unknown;
  try {
    pkg = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    throw new VendorError(`${file} is not valid JSON: fix it, then run this again`);
  }
  if (typeof pkg !== 'object' || pkg === null || Array.isArray(pkg)) {
    throw new VendorError(`${file} does not hold a JSON object: it is not an app's package.json`);
  }
  return { dir, pkg: pkg as PackageJson };
}

/** The integrity npm records for a tarball (package-lock.json's `integrity`). */
export const integrityOf = (bytes: Buffer) => `sha512-${createHash('sha512').update(bytes).digest('base64')}`;

/** The integrity package-lock.json records for skiplock, if the app has one. */
function lockedIntegrity(dir: string): string | undefined {
  try {
    const lock = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8')) as {
      packages?: Record<string, { integrity?: string }>;
    };
    return lock.packages?.['node_modules/skiplock']?.integrity;
  } catch {
    return undefined;
  }
}

const shellWord = (word: string) => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`);

/**
 * What the app still has to run once `vendored` (e.g. vendor/skiplock-0.1.0.tgz) holds the bytes
 * whose integrity is given; `cdArg` is the folder as the user typed it, when it is not where they are.
 */
export function nextSteps(app: App, vendored: string, integrity: string, cdArg?: string): string[] {
  const spec = `file:${vendored}`;
  const declared = app.pkg.dependencies?.skiplock ?? app.pkg.devDependencies?.skiplock;
  const locked = lockedIntegrity(app.dir);
  if (declared === spec && locked === integrity) {
    return ['package.json and package-lock.json already name these bytes: nothing to install.'];
  }
  const missing = PEERS.filter((peer) => !app.pkg.dependencies?.[peer] && !app.pkg.devDependencies?.[peer]);
  const steps = [
    'now, in the app:',
    ...(cdArg === undefined ? [] : [`  cd ${shellWord(cdArg)}`]),
    `  npm install ${[`./${vendored}`, ...missing].join(' ')}`,
    '  git add vendor package.json package-lock.json',
  ];
  if (declared === spec && locked !== undefined) {
    // test/e2e/vendor.test.ts checks npm's side of this.
    steps.push(
      'package-lock.json records the previous tarball: name the file, as above. A bare npm install keeps the old',
      'integrity; then a clean install (Vercel, CI) fails with EINTEGRITY, and a machine that has the old tarball',
      'in its npm cache installs the old one.',
    );
  } else {
    steps.push(
      `package.json then names "skiplock": "${spec}", a path inside the app, and package-lock.json the`,
      "tarball's integrity: a clone of the app (CI, Vercel, a teammate) installs these bytes. Commit vendor/.",
    );
  }
  return steps;
}

/** The .gitignore rule that hides `file` (relative to the app) from git, if one does. */
export async function ignoredBy(dir: string, file: string): Promise<string | undefined> {
  try {
    await run('git', ['-C', dir, 'check-ignore', '-q', '--', file]);
    // Exit 0: ignored. -v names the rule (it also names a matching !rule, hence the first call).
    const { stdout } = await run('git', ['-C', dir, 'check-ignore', '-v', '--', file]);
    return stdout.split('\t')[0];
  } catch {
    return undefined; // not ignored (exit 1), not a repository, or no git
  }
}
