import { existsSync, readFileSync } from 'node:fs';
// Not `{ createRequire }`: a bundle's banner (`const require = createRequire(import.meta.url)`) declares it.
import * as nodeModule from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigError } from '../base/errors.js';
import { scrubSecrets } from '../base/scrub-secrets.js';
import { type JobDefinition, JobRegistry } from '../core/jobs.js';
import type { ScheduleDefinition } from '../core/schedules.js';

/** What `--jobs` gives the commands: the module's kinds, and its schedules when it exports `schedules`. */
export interface JobsModule {
  registry: JobRegistry | undefined;
  schedules: ScheduleDefinition[] | undefined;
}

const TYPESCRIPT = /\.[cm]?tsx?$/;

/**
 * Node's own import failures that a TypeScript loader gets past: no type stripping (Node before 22.6,
 * or 22.6–22.17 without the flag), syntax stripping cannot erase (enums, namespaces), a file under
 * node_modules, and `./kinds.js` naming kinds.ts, as TypeScript's NodeNext resolution writes it.
 */
const NEEDS_A_TYPESCRIPT_LOADER = new Set([
  'ERR_UNKNOWN_FILE_EXTENSION',
  'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX',
  'ERR_INVALID_TYPESCRIPT_SYNTAX',
  'ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING',
  'ERR_MODULE_NOT_FOUND',
]);

/**
 * Loads the module `--jobs` names. JavaScript, and TypeScript the running Node can strip, load with
 * Node's own import; other TypeScript loads through the tsx the app has installed (its programmatic
 * API, scoped to this one import). Every failure is a ConfigError that says why, with the cause.
 */
export async function loadJobsModule(module: string | undefined): Promise<JobsModule> {
  if (!module) return { registry: undefined, schedules: undefined };
  const path = resolve(module);
  if (!existsSync(path)) throw new ConfigError(`cannot load the jobs module ${module}: there is no file ${path}`);
  const loaded = await importModule(module, path);
  if (!Array.isArray(loaded.jobs))
    throw new ConfigError(`${module} does not export \`jobs\` (an array of defineJob kinds)`);
  if (loaded.schedules !== undefined && !Array.isArray(loaded.schedules))
    throw new ConfigError(`${module} exports \`schedules\`, but not as an array of defineSchedule schedules`);
  return {
    // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
    registry: new JobRegistry(loaded.jobs as JobDefinition<any, any>[]),
    schedules: loaded.schedules as ScheduleDefinition[] | undefined,
  };
}

type Exports = { jobs?: unknown; schedules?: unknown };

async function importModule(module: string, path: string): Promise<Exports> {
  const url = pathToFileURL(path).href;
  let native: unknown;
  try {
    return (await import(url)) as Exports;
  } catch (err) {
    if (!TYPESCRIPT.test(path) || !NEEDS_A_TYPESCRIPT_LOADER.has(codeOf(err) ?? '')) {
      throw new ConfigError(`cannot load the jobs module ${module}: ${describeCause(err)}`);
    }
    native = err;
  }
  const tsImport = await tsxImport(module, path, native);
  try {
    return (await tsImport(url, { parentURL: url })) as Exports;
  } catch (err) {
    throw new ConfigError(`cannot load the jobs module ${module} through tsx: ${describeCause(err)}`);
  }
}

type TsImport = (specifier: string, options: { parentURL: string }) => Promise<unknown>;

/**
 * tsx's `tsImport` (tsx/esm/api, 4.8+: an import through tsx's loader, registered for that import
 * alone), as the app resolves tsx: from the module's folder up, else from the current folder. Its
 * ESM build, found through tsx's own exports map: the CommonJS build cannot register the loader
 * once imported. A ConfigError that says what to do when there is none.
 */
async function tsxImport(module: string, path: string, native: unknown): Promise<TsImport> {
  const manifest = [path, join(process.cwd(), 'package.json')].map(resolveTsxManifest).find(Boolean);
  if (!manifest) {
    throw new ConfigError(
      `cannot load the jobs module ${module}: ${nodeCannot(native)}, and no TypeScript loader (tsx) is installed in ${dirname(path)}, a folder above it or the current folder. Install it in your app (npm install --save-dev tsx), point --jobs at the compiled JavaScript, or run the CLI on Node 22.18 or later (22.6 to 22.17: with NODE_OPTIONS=--experimental-strip-types)`,
    );
  }
  const tooOld = new ConfigError(
    `cannot load the jobs module ${module}: the tsx in ${dirname(manifest)} is older than the CLI needs (4.8, for tsImport); upgrade it (npm install --save-dev tsx@latest)`,
  );
  const exported = (JSON.parse(readFileSync(manifest, 'utf8')) as { exports?: Record<string, unknown> }).exports?.[
    './esm/api'
  ] as { import?: string | { default?: string } } | undefined;
  const file = typeof exported?.import === 'string' ? exported.import : exported?.import?.default;
  if (!file) throw tooOld;
  let api: { tsImport?: TsImport };
  try {
    api = (await import(pathToFileURL(join(dirname(manifest), file)).href)) as typeof api;
  } catch (err) {
    throw new ConfigError(`cannot load the jobs module ${module}: loading tsx failed: ${describeCause(err)}`);
  }
  if (typeof api.tsImport !== 'function') throw tooOld;
  return api.tsImport;
}

function resolveTsxManifest(from: string): string | undefined {
  try {
    return nodeModule.createRequire(from).resolve('tsx/package.json');
  } catch {
    return undefined; // not installed there
  }
}

/** Why Node's own import failed, in words: it has no type stripping, or stripping could not load this module. */
function nodeCannot(err: unknown): string {
  const cause = describeCause(err);
  return codeOf(err) === 'ERR_UNKNOWN_FILE_EXTENSION'
    ? `Node ${process.version} cannot import TypeScript by itself (${cause})`
    : `Node ${process.version} could not import it with its type stripping (${cause})`;
}

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** An error's message on one line, with its code, without stack frames or credentials. */
function describeCause(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const lines = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !/^at\s/.test(line));
  const message = scrubSecrets(lines.join(' ')).slice(0, 500);
  const code = codeOf(err);
  return code && !message.includes(code) ? `${code}: ${message}` : message;
}
