import { readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The layers point one way (docs: STYLE.md, "Layers that point one way"): base/ at the bottom,
 * db/ on it, core/ on both; adapters/, cli/ and testing/ on top; the deployable app in functions/
 * and api/ sees skiplock only through its package name, as a user's app does. The rules are read
 * from the import statements of the sources, so a type-only import counts as much as a value one.
 * Within and across the layers, no modules import one another's values in a circle: a circle makes
 * the order they evaluate in depend on which one is imported first.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));

/** What each layer may import by relative path or by package name, as top-level folders. */
const MAY_IMPORT: Record<string, readonly string[]> = {
  base: ['base'],
  db: ['base', 'db'],
  core: ['base', 'db', 'core'],
  // The app: one another by relative path; the library only as 'skiplock', 'skiplock/lambda', …
  functions: ['functions', 'api'],
  api: ['functions', 'api'],
};
/** The app's package-name imports are how it should reach the library, so they are not checked. */
const APP = new Set(['functions', 'api']);
/**
 * No cloud SDK in the core, nor below it (core imports db/ and base/, so an SDK there would be
 * pulled into the core as well).
 */
const CLOUD_SDK = /^@(aws-sdk|vercel)\//;
const NO_CLOUD_SDK = new Set(['base', 'db', 'core']);
/** The core takes its configuration as arguments; adapters/ reads the environment. */
const NO_PROCESS_ENV = new Set(['core']);

interface ImportRef {
  specifier: string;
  line: number;
}

/** Blanks the comments that start a line (JSDoc and `//`), keeping line numbers. */
function withoutComments(source: string): string {
  const blank = (text: string) => text.replace(/[^\n]/g, '');
  return source.replace(/^[ \t]*\/\*[\s\S]*?\*\//gm, blank).replace(/^[ \t]*\/\/.*$/gm, blank);
}

const lineAt = (source: string, index: number) => source.slice(0, index).split('\n').length;

/**
 * Module specifiers of a source's static imports and re-exports (anchored at a line start, so
 * `from 'window'` inside SQL is not one), side-effect imports and dynamic `import('…')`.
 */
function importsOf(source: string): ImportRef[] {
  const text = withoutComments(source);
  const patterns = [
    /^[ \t]*(?:import|export)\b[^'"`;]*?\bfrom\s*(['"])([^'"]+)\1/gm,
    /^[ \t]*import\s*(['"])([^'"]+)\1/gm,
    /\bimport\s*\(\s*(['"])([^'"]+)\1\s*\)/g,
  ];
  return patterns
    .flatMap((pattern) =>
      [...text.matchAll(pattern)].map((m) => ({ specifier: m[2] as string, line: lineAt(text, m.index) })),
    )
    .sort((a, b) => a.line - b.line);
}

/**
 * The relative specifiers a source imports for their values: a static import or re-export that
 * names at least one value (not `import type`, not `{ type A, type B }`) and side-effect imports.
 * A type-only import is erased at build time and a dynamic `import('…')` runs later, so neither
 * makes modules evaluate one another in a circle.
 */
function valueImportsOf(source: string): ImportRef[] {
  const text = withoutComments(source);
  const refs: ImportRef[] = [];
  for (const m of text.matchAll(/^[ \t]*(?:import|export)\b([^'"`;]*?)\bfrom\s*(['"])([^'"]+)\2/gm)) {
    const clause = (m[1] as string).trim();
    if (/^type\b/.test(clause)) continue;
    const braces = /^\{([\s\S]*)\}$/.exec(clause);
    const names = braces
      ? (braces[1] as string)
          .split(',')
          .map((n) => n.trim())
          .filter(Boolean)
      : [clause];
    if (names.length > 0 && names.every((n) => /^type\s/.test(n))) continue;
    refs.push({ specifier: m[3] as string, line: lineAt(text, m.index) });
  }
  for (const m of text.matchAll(/^[ \t]*import\s*(['"])([^'"]+)\1/gm))
    refs.push({ specifier: m[2] as string, line: lineAt(text, m.index) });
  return refs.filter((r) => r.specifier.startsWith('.')).sort((a, b) => a.line - b.line);
}

/**
 * The circles of value imports among `files`, each as its modules in import order from the
 * first by name, closed by that first (`a.ts → b.ts → a.ts`). Found as the strongly connected
 * components of the value-import graph (Tarjan), so a circle through many modules is one line.
 */
function valueCircles(files: Map<string, string>): string[] {
  const edges = new Map<string, string[]>();
  for (const [file, source] of files) {
    const targets = valueImportsOf(source)
      .map(({ specifier }) => posix.normalize(posix.join(posix.dirname(file), specifier)).replace(/\.js$/, '.ts'))
      .filter((target) => files.has(target));
    edges.set(file, [...new Set(targets)]);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v) as number);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (edges.get(v) ?? []).includes(v)) components.push(component);
    }
  };
  for (const file of [...files.keys()].sort()) if (!index.has(file)) visit(file);
  // Each component as one walk: from its first module by name, follow value imports that stay in it.
  return components
    .map((component) => {
      const members = new Set(component);
      const first = [...component].sort()[0] as string;
      const path = [first];
      const seen = new Set(path);
      let at = first;
      for (;;) {
        const next = (edges.get(at) ?? []).filter((w) => members.has(w));
        const fresh = next.find((w) => !seen.has(w));
        if (fresh === undefined) {
          path.push(next.includes(first) ? first : (next[0] as string));
          break;
        }
        path.push(fresh);
        seen.add(fresh);
        at = fresh;
      }
      return path.join(' → ');
    })
    .sort();
}

/** Lines that read the environment: `process.env`, `process['env']`, `{ env } = process`, `env` from node:process. */
function processEnvReads(source: string): number[] {
  const text = withoutComments(source);
  const pattern =
    /\bprocess\s*(?:\.\s*env\b|\[\s*['"`]env['"`]\s*\])|\{[^}]*\benv\b[^}]*\}\s*=\s*(?:globalThis\s*\.\s*)?process\b|\{[^}]*\benv\b[^}]*\}\s*from\s*['"](?:node:)?process['"]/g;
  return [...text.matchAll(pattern)].map((m) => lineAt(text, m.index));
}

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, string | { import: string }>;
};

/** 'skiplock/lambda' → 'adapters', from package.json's exports ('./dist/adapters/lambda.js'). */
function packageFolder(specifier: string): string | undefined {
  if (specifier !== pkg.name && !specifier.startsWith(`${pkg.name}/`)) return undefined;
  const target = pkg.exports[`.${specifier.slice(pkg.name.length)}`];
  const path = typeof target === 'object' ? target.import : target;
  return path?.replace(/^\.\/dist\//, '').split('/')[0] ?? '(not exported)';
}

/** Every broken rule in `files` (path relative to the repository, with '/', → source), one line each. */
function layerViolations(files: Map<string, string>): string[] {
  const violations: string[] = [];
  for (const [file, source] of files) {
    const layer = file.split('/')[0] as string;
    const allowed = MAY_IMPORT[layer];
    for (const { specifier, line } of importsOf(source)) {
      const where = `${file}:${line} imports '${specifier}'`;
      if (specifier.startsWith('.')) {
        const folder = posix.normalize(posix.join(posix.dirname(file), specifier)).split('/')[0] as string;
        if (allowed && !allowed.includes(folder))
          violations.push(
            APP.has(layer)
              ? `${where}: ${layer}/ reaches ${folder}/ by a relative path; import it as '${pkg.name}…'`
              : `${where}: ${layer}/ may not import from ${folder}/ (only ${allowed.map((f) => `${f}/`).join(', ')})`,
          );
        continue;
      }
      const folder = packageFolder(specifier);
      if (folder !== undefined && allowed && !APP.has(layer) && !allowed.includes(folder))
        violations.push(`${where}, which is ${folder}/: ${layer}/ may not import from ${folder}/`);
      if (CLOUD_SDK.test(specifier) && NO_CLOUD_SDK.has(layer))
        violations.push(`${where}: ${layer}/ may not depend on a cloud SDK`);
    }
    if (NO_PROCESS_ENV.has(layer))
      for (const line of processEnvReads(source))
        violations.push(`${file}:${line} reads process.env: ${layer}/ takes its configuration as arguments`);
  }
  return violations;
}

/** The TypeScript and JavaScript sources under the given top-level folders. */
function readSources(folders: readonly string[]): Map<string, string> {
  const files = new Map<string, string>();
  for (const folder of folders) {
    const names = readdirSync(join(root, folder), { recursive: true, encoding: 'utf8' });
    for (const name of names.sort()) {
      if (!/\.(ts|mts|js|mjs)$/.test(name) || name.endsWith('.d.ts')) continue;
      files.set(`${folder}/${name.split('\\').join('/')}`, readFileSync(join(root, folder, name), 'utf8'));
    }
  }
  return files;
}

describe('layers', () => {
  it('the scanner reads static, type-only, multi-line, re-exported, side-effect and dynamic imports, not comments or SQL', () => {
    const source = [
      "import { a } from './a.js';",
      "import type { B } from '../db/b.js';",
      'import {',
      '  c,',
      '  d,',
      "} from 'zod';",
      "export { e } from './e.js';",
      "export * from '../base/f.js';",
      "import './side-effect.js';",
      '/**',
      " * import { x } from '../adapters/in-a-comment.js';",
      ' */',
      "// import { y } from '../cli/in-a-line-comment.js';",
      "const sql = `select 1 where mode is distinct from 'window'`;",
      "const sdk = await import('@aws-sdk/client-secrets-manager');",
      'const env = process.env.SKIPLOCK_X;',
      "const { env: other } = process; const third = process['env'];",
    ].join('\n');
    expect(importsOf(source)).toEqual([
      { specifier: './a.js', line: 1 },
      { specifier: '../db/b.js', line: 2 },
      { specifier: 'zod', line: 3 },
      { specifier: './e.js', line: 7 },
      { specifier: '../base/f.js', line: 8 },
      { specifier: './side-effect.js', line: 9 },
      { specifier: '@aws-sdk/client-secrets-manager', line: 15 },
    ]);
    expect(processEnvReads(source)).toEqual([16, 17, 17]);
    expect(processEnvReads("import { env } from 'node:process';")).toEqual([1]);
  });

  it('reports each offending file and import', () => {
    const violations = layerViolations(
      new Map([
        ['base/errors.ts', "import type { Row } from '../db/schema.js';"],
        ['db/execute.ts', "import { ConfigError } from '../base/errors.js';\nimport { log } from '../core/logger.js';"],
        [
          'core/worker.ts',
          [
            "import { Clock } from './clock.js';",
            "import { claimJobs } from '../db/statements/claim.js';",
            "import { fromEnv } from '../adapters/config.js';",
            "import { handler } from 'skiplock/lambda';",
            "const secrets = await import('@aws-sdk/client-secrets-manager');",
            "import type { VercelRequest } from '@vercel/node';",
            'const level = process.env.SKIPLOCK_LOG_LEVEL;',
          ].join('\n'),
        ],
        [
          'functions/worker.ts',
          [
            "import { createLambdaWorker } from 'skiplock/lambda';",
            "import { jobs } from './jobs.js';",
            "import { report } from '../api/reports-worker.js';",
            "import { defineJob } from '../core/jobs.js';",
          ].join('\n'),
        ],
        ['api/enqueue.ts', "import { jobs } from '../functions/jobs.js';\nimport { a } from '../adapters/http.js';"],
      ]),
    );
    expect(violations).toEqual([
      "base/errors.ts:1 imports '../db/schema.js': base/ may not import from db/ (only base/)",
      "db/execute.ts:2 imports '../core/logger.js': db/ may not import from core/ (only base/, db/)",
      "core/worker.ts:3 imports '../adapters/config.js': core/ may not import from adapters/ (only base/, db/, core/)",
      "core/worker.ts:4 imports 'skiplock/lambda', which is adapters/: core/ may not import from adapters/",
      "core/worker.ts:5 imports '@aws-sdk/client-secrets-manager': core/ may not depend on a cloud SDK",
      "core/worker.ts:6 imports '@vercel/node': core/ may not depend on a cloud SDK",
      'core/worker.ts:7 reads process.env: core/ takes its configuration as arguments',
      "functions/worker.ts:4 imports '../core/jobs.js': functions/ reaches core/ by a relative path; import it as 'skiplock…'",
      "api/enqueue.ts:2 imports '../adapters/http.js': api/ reaches adapters/ by a relative path; import it as 'skiplock…'",
    ]);
  });

  it('the sources keep them: base/ ← db/ ← core/, no cloud SDK or process.env in the core, the app imports skiplock by name', () => {
    const files = readSources(Object.keys(MAY_IMPORT));
    // The scan saw the tree: every layer has sources, and the imports that should exist were found.
    for (const folder of Object.keys(MAY_IMPORT))
      expect(
        [...files.keys()].some((f) => f.startsWith(`${folder}/`)),
        `${folder}/ has sources`,
      ).toBe(true);
    const specifiers = [...files].flatMap(([file, source]) => importsOf(source).map((i) => `${file} ${i.specifier}`));
    expect(specifiers.some((s) => /^core\/\S+ \.\.\/db\//.test(s))).toBe(true);
    expect(specifiers.some((s) => /^functions\/\S+ skiplock\//.test(s))).toBe(true);

    expect(layerViolations(files)).toEqual([]);
  });

  it('finds circles of value imports, not of type-only or dynamic ones', () => {
    const files = new Map([
      // The shape core/worker/ had: attempt.ts ran the steps, steps.ts threw attempt.ts's JobAbort.
      ['core/worker/attempt.ts', "import { StepRunner } from './steps.js';\nexport class JobAbort extends Error {}"],
      [
        'core/worker/steps.ts',
        "import type { Attempt } from './attempt.js';\nimport { JobAbort } from './attempt.js';\nexport class StepRunner {}",
      ],
      // The shape cli/ had: commands.ts → rate-commands.ts → flow-commands.ts for values, and back to
      // commands.ts for a type only: not a value circle. With a value back, one through three modules.
      ['cli/commands.ts', "import { rateUseTable } from './rate-commands.js';"],
      ['cli/rate-commands.ts', "import {\n  operator,\n  str,\n} from './flow-commands.js';"],
      ['cli/flow-commands.ts', "import type { CommandContext } from './commands.js';"],
      ['db/a.ts', "import { b } from './b.js';"],
      ['db/b.ts', "import { c } from './c.js';"],
      ['db/c.ts', "import { type A, a } from './a.js';"],
      // Not circles: a type-only import back, braces of types only, and a dynamic import.
      ['core/a.ts', "import { b } from './b.js';"],
      ['core/b.ts', "import type { A } from './a.js';\nexport { type A2, type A3 } from './a.js';"],
      ['core/c.ts', "import { d } from './d.js';"],
      ['core/d.ts', "const c = await import('./c.js');"],
    ]);
    expect(valueCircles(files)).toEqual([
      'core/worker/attempt.ts → core/worker/steps.ts → core/worker/attempt.ts',
      'db/a.ts → db/b.ts → db/c.ts → db/a.ts',
    ]);
  });

  it('no modules import one another for values in a circle, in any layer', () => {
    const files = readSources([...Object.keys(MAY_IMPORT), 'adapters', 'cli', 'testing']);
    // The graph was read: the worker's modules import one another's values.
    expect(valueImportsOf(files.get('core/worker/attempt.ts') ?? '').length).toBeGreaterThan(0);
    expect(valueCircles(files)).toEqual([]);
  });
});
