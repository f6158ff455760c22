// The docs cannot drift from the code: every TypeScript block in README.md and docs/*.md is a
// region of a file that `tsc --noEmit` type-checks (examples/), every relative link points at a
// file that exists, and every `skiplock <command>` in a shell block is a command the CLI lists.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { is } from 'drizzle-orm';
import { PgTable } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../cli/run.js';
import { githubSlug } from '../../scripts/docs-toc.js';
import { pages, parseMarkdown, read, root } from '../helpers/markdown.js';

/** Drops the lines' common indentation and the blank lines around them. */
function normalize(lines: readonly string[]): string {
  const trimmed = lines.map((l) => l.trimEnd());
  while (trimmed.length > 0 && trimmed[0] === '') trimmed.shift();
  while (trimmed.length > 0 && trimmed[trimmed.length - 1] === '') trimmed.pop();
  const indent = Math.min(...trimmed.filter((l) => l !== '').map((l) => l.length - l.trimStart().length));
  return trimmed.map((l) => l.slice(Number.isFinite(indent) ? indent : 0)).join('\n');
}

const REGION = /^\s*\/\/ #(region|endregion) (\S+)\s*$/;

/** The regions of a source file by name (marker lines of nested regions left out), or a problem. */
function regionsOf(source: string): Map<string, string[] | string> {
  const regions = new Map<string, string[] | string>();
  const open = new Map<string, string[]>();
  for (const line of source.split('\n')) {
    const marker = REGION.exec(line);
    if (marker) {
      const [, which, name] = marker as unknown as [string, string, string];
      if (which === 'region') {
        if (open.has(name) || regions.has(name)) regions.set(name, `region ${name} is opened twice`);
        else open.set(name, []);
      } else if (open.has(name)) {
        if (!regions.has(name)) regions.set(name, open.get(name) as string[]);
        open.delete(name);
      } else {
        regions.set(name, `#endregion ${name} has no #region`);
      }
      continue;
    }
    for (const lines of open.values()) lines.push(line);
  }
  for (const name of open.keys()) regions.set(name, `region ${name} is never closed`);
  return regions;
}

const MARKER = /^<!-- example: (\S+?)#(\S+) -->$/;

describe('docs', () => {
  it('every TypeScript block is a region of a type-checked example file, shown verbatim', () => {
    const problems: string[] = [];
    for (const page of pages) {
      for (const block of parseMarkdown(read(page)).blocks) {
        if (block.lang !== 'ts' && block.lang !== 'typescript') continue;
        const where = `${page}:${block.line}`;
        const marker = MARKER.exec(block.before.trim());
        if (!marker) {
          problems.push(
            `${where}: a \`\`\`ts block needs <!-- example: examples/<file>.ts#<region> --> on the line before`,
          );
          continue;
        }
        const [, file, name] = marker as unknown as [string, string, string];
        if (!file.startsWith('examples/') || !file.endsWith('.ts')) {
          problems.push(`${where}: ${file} is not a .ts file under examples/ (tsconfig type-checks only those)`);
          continue;
        }
        if (!existsSync(join(root, file))) {
          problems.push(`${where}: ${file} does not exist`);
          continue;
        }
        const region = regionsOf(read(file)).get(name);
        if (region === undefined) {
          problems.push(`${where}: ${file} has no region ${name} (// #region ${name} … // #endregion ${name})`);
        } else if (typeof region === 'string') {
          problems.push(`${where}: ${file}: ${region}`);
        } else if (normalize(region) !== normalize(block.text)) {
          problems.push(`${where}: the block differs from ${file}#${name}; copy the region into the page`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('every example marker stands before a TypeScript block, and every region of examples/docs is shown', () => {
    const problems: string[] = [];
    const shown = new Set<string>();
    for (const page of pages) {
      const source = read(page);
      const starts = new Set(
        parseMarkdown(source)
          .blocks.filter((b) => b.lang === 'ts' || b.lang === 'typescript')
          .map((b) => b.line),
      );
      source.split('\n').forEach((line, index) => {
        const marker = MARKER.exec(line.trim());
        if (!marker) return;
        shown.add(`${marker[1]}#${marker[2]}`);
        if (!starts.has(index + 2))
          problems.push(`${page}:${index + 1}: example marker not followed by a \`\`\`ts block`);
      });
    }
    const walk = (dir: string): string[] =>
      readdirSync(join(root, dir)).flatMap((name) => {
        const path = `${dir}/${name}`;
        return statSync(join(root, path)).isDirectory() ? walk(path) : path.endsWith('.ts') ? [path] : [];
      });
    for (const file of walk('examples/docs')) {
      for (const name of regionsOf(read(file)).keys()) {
        if (!shown.has(`${file}#${name}`)) problems.push(`${file}: region ${name} is not shown in any page`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('every relative link points at a file that exists (and at a heading, for a markdown anchor)', () => {
    const problems: string[] = [];
    const headingsOf = new Map<string, Set<string>>();
    const headings = (page: string) => {
      let set = headingsOf.get(page);
      if (!set) {
        set = new Set();
        const counts = new Map<string, number>();
        for (const line of parseMarkdown(read(page)).prose) {
          const heading = /^#{1,6}\s+(.*)$/.exec(line);
          if (!heading) continue;
          const slug = githubSlug(heading[1] as string);
          const seen = counts.get(slug) ?? 0;
          counts.set(slug, seen + 1);
          set.add(seen === 0 ? slug : `${slug}-${seen}`);
        }
        headingsOf.set(page, set);
      }
      return set;
    };
    for (const page of pages) {
      parseMarkdown(read(page)).prose.forEach((line, index) => {
        const text = line.replace(/`[^`]*`/g, '');
        const targets = [
          ...[...text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1] as string),
          ...[...text.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/g)].map((m) => m[1] as string),
        ];
        for (const target of targets) {
          if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
          const [path = '', anchor] = target.split('#');
          const file = path === '' ? page : relative(root, join(root, dirname(page), decodeURI(path)));
          const where = `${page}:${index + 1}`;
          if (file.startsWith('..') || !existsSync(join(root, file))) {
            problems.push(`${where}: ${target} → ${file} does not exist`);
          } else if (anchor && file.endsWith('.md') && !headings(file).has(anchor)) {
            problems.push(`${where}: ${target} → ${file} has no heading #${anchor}`);
          }
        }
      });
    }
    expect(problems).toEqual([]);
  });

  it('every `skiplock <command>` in a shell block is a command `skiplock --help` lists', async () => {
    let help = '';
    await runCli(['--help'], { env: {}, out: (text) => (help += text), err: () => {} });
    const commands = new Set<string>();
    const section = help.split(/^commands:$/m)[1]?.split(/^\S/m)[0] ?? '';
    for (const line of section.split('\n')) {
      // `  jobs list [--state s]`, `  init lambda|vercel [--dir path]`, `  migrate     apply migrations`
      const command = /^ {2}([a-z]+(?:-[a-z]+)*)(?: ([a-z]+(?:\|[a-z]+)*)\b)?/.exec(line);
      if (!command) continue;
      const [, name = '', subcommands] = command;
      if (subcommands) for (const sub of subcommands.split('|')) commands.add(`${name} ${sub}`);
      else commands.add(name);
    }
    // `skiplock init lambda|vercel` is being added to the CLI: accept it until --help lists it.
    if (![...commands].some((c) => c.startsWith('init '))) commands.add('init lambda').add('init vercel');
    expect(commands).toContain('dlq replay');
    expect(commands).toContain('rate-limits set');
    const withSubcommands = new Set([...commands].filter((c) => c.includes(' ')).map((c) => c.split(' ')[0]));

    const problems: string[] = [];
    for (const page of pages) {
      for (const block of parseMarkdown(read(page)).blocks) {
        if (!['sh', 'bash', 'shell', 'console'].includes(block.lang)) continue;
        block.text.forEach((line, offset) => {
          const code = line.replace(/\s#.*$/, '');
          for (const use of code.matchAll(
            /(?:^|&&|;|\|)\s*(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:npx\s+)?skiplock\s+([^\s]+)(?:\s+([^\s]+))?/g,
          )) {
            const [, first = '', second = ''] = use;
            if (first.startsWith('-')) continue; // skiplock --help, --json …
            // `skiplock breakers` alone is a command too (`breakers reset` has a subcommand).
            const command =
              withSubcommands.has(first) && !(commands.has(first) && (second === '' || second.startsWith('-')))
                ? `${first} ${second}`
                : first;
            if (!commands.has(command)) {
              problems.push(
                `${page}:${block.line + offset + 1}: \`skiplock ${command}\` is not a command of skiplock --help`,
              );
            }
          }
        });
      }
    }
    expect(problems).toEqual([]);
  });

  it("the README's subpath table names every table skiplock/schema exports", async () => {
    const schema: Record<string, unknown> = await import('../../db/schema.js');
    const tables = Object.keys(schema)
      .filter((name) => is(schema[name], PgTable))
      .sort();
    const row = readFileSync(join(root, 'README.md'), 'utf8')
      .split('\n')
      .find((line) => line.startsWith('| `skiplock/schema` |'));
    const listed = [...(row?.match(/every Drizzle table \(([^)]*)\)/)?.[1] ?? '').matchAll(/`(\w+)`/g)].map(
      (m) => m[1],
    );
    expect(listed.sort()).toEqual(tables);
  });
});
