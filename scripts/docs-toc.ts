// Every page's table of contents, written from its headings: `npx tsx scripts/docs-toc.ts --write`
// rewrites the `<!-- toc -->` … `<!-- /toc -->` block of README.md and each docs/*.md that has `##`
// sections (inserting one before the first `##` where there is none); without --write it lists the
// pages whose block is out of date. test/unit/docs-toc.test.ts fails on such a page.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const TOC_START = '<!-- toc -->';
export const TOC_END = '<!-- /toc -->';
export const TOC_WRITE = 'npx tsx scripts/docs-toc.ts --write';
/** A page longer than this many words lists its `###` sections too. */
export const LONG_PAGE_WORDS = 2500;

export interface Heading {
  level: number;
  text: string;
  slug: string;
  /** 0-based line. */
  line: number;
}

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens. */
export function githubSlug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The headings of a markdown page outside code blocks, with GitHub's anchors (duplicates numbered). */
export function headingsOf(source: string): Heading[] {
  const headings: Heading[] = [];
  const counts = new Map<string, number>();
  let fence: string | undefined;
  source.split('\n').forEach((line, index) => {
    const marker = /^\s*(```+|~~~+)/.exec(line)?.[1];
    if (marker) {
      if (!fence) fence = marker;
      else if (marker.startsWith(fence[0] as string) && marker.length >= fence.length) fence = undefined;
      return;
    }
    if (fence) return;
    const match = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (!match) return;
    const text = match[2] as string;
    const base = githubSlug(text);
    const seen = counts.get(base) ?? 0;
    counts.set(base, seen + 1);
    headings.push({
      level: (match[1] as string).length,
      text,
      slug: seen === 0 ? base : `${base}-${seen}`,
      line: index,
    });
  });
  return headings;
}

/** Words of the page outside its table of contents (which must not decide its own depth). */
function words(source: string): number {
  const start = source.indexOf(TOC_START);
  const end = source.indexOf(TOC_END);
  const text = start >= 0 && end > start ? source.slice(0, start) + source.slice(end) : source;
  return text.split(/\s+/).filter(Boolean).length;
}

/** The headings a page's table of contents must list: every `##`, and every `###` on a long page. */
export function tocHeadings(source: string): Heading[] {
  const depth = words(source) > LONG_PAGE_WORDS ? 3 : 2;
  return headingsOf(source).filter((h) => h.level >= 2 && h.level <= depth);
}

/** The block a page's headings call for. */
export function renderToc(source: string): string {
  const lines = tocHeadings(source).map((h) => {
    const label = h.text.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    return `${'  '.repeat(h.level - 2)}- [${label}](#${h.slug})`;
  });
  return [TOC_START, ...lines, TOC_END].join('\n');
}

/** The page with its table of contents written (or undefined: it has no `##` section). */
export function withToc(source: string): string | undefined {
  if (tocHeadings(source).length === 0) return undefined;
  const toc = renderToc(source);
  const start = source.indexOf(TOC_START);
  if (start >= 0) {
    const end = source.indexOf(TOC_END, start);
    if (end < 0) throw new Error(`${TOC_START} without ${TOC_END}`);
    return source.slice(0, start) + toc + source.slice(end + TOC_END.length);
  }
  // A hand-written list of `- [x](#y)` lines before the first section gives way to the block.
  const lines = source.split('\n');
  const first = headingsOf(source).find((h) => h.level === 2)?.line ?? lines.length;
  const listStart = lines.findIndex((line, i) => i < first && /^- \[[^\]]+\]\(#[^)]+\)/.test(line));
  if (listStart >= 0) {
    let listEnd = listStart;
    while (listEnd + 1 < first && /^\s*- \[[^\]]+\]\(#/.test(lines[listEnd + 1] as string)) listEnd++;
    return [...lines.slice(0, listStart), toc, ...lines.slice(listEnd + 1)].join('\n');
  }
  return [...lines.slice(0, first), toc, '', ...lines.slice(first)].join('\n');
}

/** README.md and docs/*.md, relative to the repository's root. */
export function docPages(root: string): string[] {
  return [
    'README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .sort()
      .map((name) => `docs/${name}`),
  ];
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const write = process.argv.includes('--write');
  const stale: string[] = [];
  for (const page of docPages(root)) {
    const source = readFileSync(join(root, page), 'utf8');
    const next = withToc(source);
    if (next === undefined || next === source) continue;
    stale.push(page);
    if (write) writeFileSync(join(root, page), next);
  }
  console.log(
    stale.length === 0 ? 'every table of contents is up to date' : `${write ? 'wrote' : 'stale'}: ${stale.join(', ')}`,
  );
  if (!write && stale.length > 0) process.exitCode = 1;
}
