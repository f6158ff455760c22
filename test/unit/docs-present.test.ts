// Reference pages state the present (STYLE 19): no page of README.md or docs/ cites an internal issue
// ("#37", "issue 25", "the issue's targets") or a work period ("session 14", "this round", "run 22",
// "runs 1–5", "item 35" of a log). The history of runs and designs lives in bench/history.md and the
// CHANGELOG. Code (blocks and inline), link targets and HTML comments are not read: a link to another
// project's issue (`owner/repo#123` or its URL) is fine, as are HTTP statuses and CSS colours in code.
import { describe, expect, it } from 'vitest';
import { pages, parseMarkdown, read } from '../helpers/markdown.js';

const PATTERNS: readonly (readonly [string, RegExp])[] = [
  ['an issue number', /(?<![\w/&#.-])#\d{1,6}\b(?![\w-])/],
  ['an issue by number', /\b(?:issues?|PRs?|pull requests?|tickets?)\s*#?\d+\b/i],
  [
    'the issue a change came from',
    /\bthe (?:[\w-]+ )?issue['’]s\b|\b(?:this|that|the release|the events|the hot-path) issue\b/i,
  ],
  ['a numbered work period', /\b(?:sessions?|rounds?|iterations?|sprints?|passes)\s+\d+\b/i],
  ['a work period', /\b(?:this|last|previous|that) (?:session|round|sprint|iteration)\b/i],
  [
    'a numbered run or log item',
    /\b(?:runs?|items?)\s+\d+\b(?![,.]\d)(?:\s*(?:[–-]|and|to)\s*\d+\b)?(?!\s*(?:ms|s|jobs|times|steps|minutes|seconds|%|×)\b)/i,
  ],
];

/** What a line says in prose: inline code, link targets and HTML comments left out. */
const proseOf = (line: string) =>
  line
    .replace(/`[^`]*`/g, '')
    .replace(/\]\([^)]*\)/g, ']')
    .replace(/<!--.*?-->/g, '')
    .replace(/https?:\/\/\S+/g, '');

/** Each reference to history in a markdown page: `line: what: the words`. */
function historyIn(source: string): string[] {
  const found: string[] = [];
  parseMarkdown(source).prose.forEach((line, index) => {
    const text = proseOf(line);
    for (const [what, pattern] of PATTERNS) {
      const match = pattern.exec(text);
      if (match) found.push(`${index + 1}: ${what}: "${match[0]}"`);
    }
  });
  return found;
}

describe('the docs state the present', () => {
  it.each(pages)('%s cites no internal issue and no work period', (page) => {
    expect(historyIn(read(page)), 'move history to bench/history.md; say what is true now').toEqual([]);
  });

  it('catches what a lab notebook says', () => {
    const notebook = [
      'Fixed in #37 (see issue 25).',
      'the issue’s targets were met',
      'measured in session 14, then this round',
      'in run 22 it was faster; runs 1–5 agree',
      'bench/history.md, item 35',
    ].join('\n\n');
    expect(historyIn(notebook).map((f) => f.replace(/^\d+: /, '').split(':')[0])).toEqual([
      'an issue number',
      'an issue by number',
      'the issue a change came from',
      'a numbered work period',
      'a work period',
      'a numbered run or log item',
      'a numbered run or log item',
    ]);
  });

  it('leaves alone what only looks like it', () => {
    const prose = [
      'A 429 or a 503 is retried; `#fff` and `#333` are colours in code.',
      'See [dherault/serverless-offline#1896](https://github.com/dherault/serverless-offline/issues/1896).',
      'A test run 1,000 jobs on each driver; in each run 3,125 stepped jobs completed.',
      'The jobs of one key run one at a time. The console keeps a session per login.',
      'Anchors like [this](#section-2) and issues a lease token per claim.',
      '```\nreport #1 in run 24\n```',
    ].join('\n\n');
    expect(historyIn(prose)).toEqual([]);
  });
});
