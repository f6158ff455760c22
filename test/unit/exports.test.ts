import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as {
  exports: Record<string, string | { types: string; import: string }>;
  bin: Record<string, string>;
  files: string[];
};
// tsconfig.json allows comments: drop whole-line ones before parsing.
const tsconfig = JSON.parse(
  readFileSync('tsconfig.json', 'utf8')
    .split('\n')
    .filter((line) => !line.trim().startsWith('//'))
    .join('\n'),
) as { compilerOptions: { paths: Record<string, string[]> } };

/** './dist/adapters/lambda.js' → './adapters/lambda.ts': where a published file's source lives. */
const sourceOf = (dist: string) => dist.replace('./dist/', './').replace(/\.js$/, '.ts');

describe('package exports', () => {
  const entries = Object.entries(pkg.exports).filter(
    (entry): entry is [string, { types: string; import: string }] => typeof entry[1] === 'object',
  );

  it('every subpath a user imports has a source file and a declaration beside its build output', () => {
    expect(entries.map(([subpath]) => subpath)).toEqual([
      '.',
      './schema',
      './lambda',
      './vercel',
      './cloudflare',
      './deno',
      './netlify',
      './otel',
      './webhooks',
      './testing',
    ]);
    for (const [, target] of entries) {
      expect(existsSync(sourceOf(target.import))).toBe(true);
      expect(target.types).toBe(target.import.replace(/\.js$/, '.d.ts'));
    }
    expect(existsSync(sourceOf(pkg.bin.skiplock as string))).toBe(true);
  });

  it("tsconfig.json's paths resolve each package name to the same source as the exports (vitest derives its aliases from the exports)", () => {
    const fromExports = Object.fromEntries(
      entries.map(([subpath, target]) => [`skiplock${subpath.slice(1)}`, [sourceOf(target.import)]]),
    );
    expect(tsconfig.compilerOptions.paths).toEqual(fromExports);
  });

  it('the package ships the files `skiplock init` copies', async () => {
    const { TEMPLATES } = await import('../../cli/init.js');
    for (const file of Object.values(TEMPLATES).flat()) {
      expect(existsSync(file)).toBe(true);
      expect(pkg.files.some((entry) => file === entry || file.startsWith(`${entry}/`))).toBe(true);
    }
  });
});
