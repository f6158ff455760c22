// Every page a team reads opens with a table of contents of all its sections, so a section added
// without a line there fails here. The block is written by `npx tsx scripts/docs-toc.ts --write`.
import { describe, expect, it } from 'vitest';
import { githubSlug, headingsOf, TOC_END, TOC_START, TOC_WRITE, tocHeadings, withToc } from '../../scripts/docs-toc.js';
import { pages, read } from '../helpers/markdown.js';

const withSections = pages.filter((page) => tocHeadings(read(page)).length > 0);

describe('tables of contents', () => {
  it('every page with sections is checked (README and the docs)', () => {
    expect(withSections).toContain('README.md');
    expect(withSections.length).toBeGreaterThan(20);
  });

  it.each(withSections)('%s lists every section near the top, each with a working anchor', (page) => {
    const source = read(page);
    const start = source.indexOf(TOC_START);
    const end = source.indexOf(TOC_END);
    expect(start, `${page} has no ${TOC_START} block: run ${TOC_WRITE}`).toBeGreaterThanOrEqual(0);
    const firstSection = headingsOf(source).find((h) => h.level === 2)?.line ?? 0;
    expect(source.slice(0, start).split('\n').length - 1, 'the block stands before the first section').toBeLessThan(
      firstSection,
    );
    const block = source.slice(start, end);
    const anchors = [...block.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]);
    const slugs = new Set(headingsOf(source).map((h) => h.slug));
    expect(
      tocHeadings(source)
        .filter((h) => !anchors.includes(h.slug))
        .map((h) => `${'#'.repeat(h.level)} ${h.text}`),
      `sections missing from ${page}'s table of contents: run ${TOC_WRITE}`,
    ).toEqual([]);
    expect(anchors.filter((anchor) => !slugs.has(anchor as string))).toEqual([]);
    expect(withToc(source), `run ${TOC_WRITE}`).toBe(source);
  });

  it('anchors follow GitHub: punctuation dropped, spaces to hyphens, duplicates numbered', () => {
    expect(githubSlug("Why isn't my job running?")).toBe('why-isnt-my-job-running');
    expect(githubSlug('connect(options)')).toBe('connectoptions');
    expect(githubSlug('Flow control (K = 4)')).toBe('flow-control-k--4');
    expect(githubSlug('Next.js (App Router)')).toBe('nextjs-app-router');
    expect(headingsOf('## A\n\n```sh\n## not a heading\n```\n## A').map((h) => h.slug)).toEqual(['a', 'a-1']);
  });

  it('a section added without a line in the table fails', () => {
    const page = `# P\n\nIntro.\n\n${TOC_START}\n- [One](#one)\n${TOC_END}\n\n## One\n\n## Two\n`;
    expect(withToc(page)).not.toBe(page);
    expect(withToc(page)).toContain('- [Two](#two)');
  });
});
