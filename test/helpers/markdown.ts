import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root, and the pages the docs tests read: README.md and docs/*.md. */
export const root = fileURLToPath(new URL('../..', import.meta.url));
export const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
];
export const read = (path: string) => readFileSync(join(root, path), 'utf8');

export interface Block {
  lang: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The line before the opening fence. */
  before: string;
  text: string[];
}

/** Fenced code blocks of a markdown text, and its lines outside them (blank in their place). */
export function parseMarkdown(source: string): { blocks: Block[]; prose: string[] } {
  const lines = source.split('\n');
  const blocks: Block[] = [];
  const prose: string[] = [];
  let open: (Block & { fence: string }) | undefined;
  lines.forEach((line, index) => {
    if (open) {
      prose.push('');
      if (line.trimStart().startsWith(open.fence) && line.trim() === line.trim().replace(/[^`~]/g, '')) {
        blocks.push(open);
        open = undefined;
      } else {
        open.text.push(line);
      }
      return;
    }
    const fence = /^\s*(```+|~~~+)\s*([\w+-]*)/.exec(line);
    if (fence) {
      prose.push('');
      open = {
        fence: fence[1] as string,
        lang: (fence[2] ?? '').toLowerCase(),
        line: index + 1,
        before: lines[index - 1] ?? '',
        text: [],
      };
    } else {
      prose.push(line);
    }
  });
  if (open) blocks.push(open);
  return { blocks, prose };
}

/**
 * The prose of a page as paragraphs (a list item and a table row each count as one), with the
 * 1-based line each starts on. Code blocks are left out.
 */
export function paragraphsOf(source: string): { line: number; text: string }[] {
  const paragraphs: { line: number; text: string }[] = [];
  let open: { line: number; text: string } | undefined;
  parseMarkdown(source).prose.forEach((line, index) => {
    // A list item, a table row or a heading starts a paragraph of its own.
    const starts = /^\s*([-*+]|\d+\.)\s|^\s*\||^#/.test(line);
    if (line.trim() === '' || starts) {
      if (open) paragraphs.push(open);
      open = line.trim() === '' ? undefined : { line: index + 1, text: line.trim() };
      if (open && line.startsWith('#')) {
        paragraphs.push(open);
        open = undefined;
      }
    } else if (open) {
      open.text += ` ${line.trim()}`;
    } else {
      open = { line: index + 1, text: line.trim() };
    }
  });
  if (open) paragraphs.push(open);
  return paragraphs;
}

/** The body rows, as cells, of the first markdown table whose header line matches `header`. */
export function tableAfter(source: string, header: RegExp): string[][] {
  const lines = parseMarkdown(source).prose;
  const at = lines.findIndex((line) => header.test(line));
  if (at < 0) return [];
  const rows: string[][] = [];
  for (const line of lines.slice(at + 2)) {
    if (!line.trimStart().startsWith('|')) break;
    rows.push(
      line
        .trim()
        .replace(/^\|/, '')
        .replace(/\|$/, '')
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim()),
    );
  }
  return rows;
}

/**
 * The offline `cdk synth` a page documents — the line `VAR=value … npx cdk synth … --flag …` of a
 * shell block — as the variables and flags to run it with (test/e2e/cdk-app.test.ts runs exactly
 * these). Undefined when the page has no such line.
 */
export function offlineCdkSynth(source: string): { env: Record<string, string>; flags: string[] } | undefined {
  for (const block of parseMarkdown(source).blocks) {
    for (const line of block.text) {
      const command = /^((?:[A-Z][A-Z0-9_]*=\S+\s+)+)npx cdk synth\b(.*)$/.exec(line.replace(/\s+#.*$/, ''));
      if (!command) continue;
      const env = Object.fromEntries(
        (command[1] as string)
          .trim()
          .split(/\s+/)
          .map((pair) => pair.split('=') as [string, string]),
      );
      const flags = (command[2] as string).split(/\s+/).filter((token) => /^--[a-z-]+$/.test(token));
      return { env, flags };
    }
  }
  return undefined;
}
