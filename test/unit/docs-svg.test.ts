// The pictures in docs/ are hand-written SVG: each must be well-formed XML (GitHub shows nothing
// for one that is not), carry its own white background (readable in light and dark mode), use no
// external image or font, and be shown by some page.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pages, read, root } from '../helpers/markdown.js';

const svgs = readdirSync(join(root, 'docs'))
  .filter((name) => name.endsWith('.svg'))
  .map((name) => `docs/${name}`);

const NAME = '[A-Za-z_:][\\w:.-]*';
const ATTRIBUTES = new RegExp(`^(?:\\s+${NAME}\\s*=\\s*(?:"[^"<]*"|'[^'<]*'))*\\s*$`);

/**
 * Why `xml` is not well-formed XML, or undefined: one root element, every tag closed in order,
 * attributes quoted and not repeated, `&` only in a known or numeric entity, no stray `<`.
 */
function xmlProblem(xml: string): string | undefined {
  const text = xml.replace(/^\uFEFF/, '');
  const open: string[] = [];
  let roots = 0;
  let at = 0;
  const lineOf = (index: number) => text.slice(0, index).split('\n').length;
  const checkText = (chunk: string, index: number) => {
    if (/&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[\da-fA-F]+);)/.test(chunk)) return `line ${lineOf(index)}: a bare &`;
    if (open.length === 0 && chunk.trim() !== '') return `line ${lineOf(index)}: text outside the root element`;
    return undefined;
  };
  while (at < text.length) {
    const lt = text.indexOf('<', at);
    if (lt < 0) return checkText(text.slice(at), at);
    const problem = checkText(text.slice(at, lt), at);
    if (problem) return problem;
    if (text.startsWith('<!--', lt)) {
      const end = text.indexOf('-->', lt + 4);
      if (end < 0) return `line ${lineOf(lt)}: an unclosed comment`;
      at = end + 3;
      continue;
    }
    if (text.startsWith('<?', lt)) {
      const end = text.indexOf('?>', lt);
      if (end < 0) return `line ${lineOf(lt)}: an unclosed processing instruction`;
      at = end + 2;
      continue;
    }
    if (text.startsWith('<![CDATA[', lt)) {
      const end = text.indexOf(']]>', lt);
      if (end < 0) return `line ${lineOf(lt)}: an unclosed CDATA section`;
      at = end + 3;
      continue;
    }
    if (text.startsWith('<!', lt)) return `line ${lineOf(lt)}: a DOCTYPE or declaration (not needed in an SVG)`;
    const gt = text.indexOf('>', lt);
    if (gt < 0) return `line ${lineOf(lt)}: an unclosed tag`;
    const tag = text.slice(lt + 1, gt);
    if (tag.startsWith('/')) {
      const name = tag.slice(1).trim();
      const expected = open.pop();
      if (name !== expected) return `line ${lineOf(lt)}: </${name}> closes <${expected ?? 'nothing'}>`;
    } else {
      const selfClosing = tag.endsWith('/');
      const body = selfClosing ? tag.slice(0, -1) : tag;
      const name = new RegExp(`^${NAME}`).exec(body)?.[0];
      if (!name) return `line ${lineOf(lt)}: a tag without a name`;
      const attributes = body.slice(name.length);
      if (!ATTRIBUTES.test(attributes)) return `line ${lineOf(lt)}: <${name}> has a malformed attribute`;
      const names = [...attributes.matchAll(new RegExp(`(${NAME})\\s*=`, 'g'))].map((m) => m[1]);
      if (new Set(names).size !== names.length) return `line ${lineOf(lt)}: <${name}> repeats an attribute`;
      if (/&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[\da-fA-F]+);)/.test(attributes))
        return `line ${lineOf(lt)}: a bare & in <${name}>`;
      if (open.length === 0) roots++;
      if (roots > 1) return `line ${lineOf(lt)}: a second root element <${name}>`;
      if (!selfClosing) open.push(name);
    }
    at = gt + 1;
  }
  if (open.length > 0) return `<${open.at(-1)}> is never closed`;
  if (roots === 0) return 'no root element';
  return undefined;
}

describe('the pictures in docs/', () => {
  it('there are the three pictures the docs show', () => {
    expect(svgs).toEqual(expect.arrayContaining(['docs/breaker.svg', 'docs/job-start.svg', 'docs/system.svg']));
  });

  it.each(svgs)('%s is well-formed XML with an <svg> root, a white background and nothing external', (svg) => {
    const xml = read(svg);
    expect(xmlProblem(xml)).toBeUndefined();
    expect(xml).toMatch(/^\s*<svg\s[^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    expect(xml).toMatch(/<rect x="0" y="0" width="[\d.]+" height="[\d.]+" fill="#ffffff"\/>/);
    expect(xml).not.toMatch(/<image\b|@import|@font-face|href="https?:/);
    expect(xml).toMatch(/<title>[^<]+<\/title>/);
  });

  it.each(svgs)('%s is shown by some page', (svg) => {
    const name = svg.replace(/^docs\//, '');
    const shownBy = pages.filter((page) =>
      read(page).includes(page === 'README.md' ? `](docs/${name})` : `](${name})`),
    );
    expect(shownBy, `no page shows ${svg}`).not.toEqual([]);
  });

  it('the checker refuses what a browser would not draw', () => {
    expect(xmlProblem('<svg><g></svg>')).toMatch(/closes/);
    expect(xmlProblem('<svg><text>a & b</text></svg>')).toMatch(/bare &/);
    expect(xmlProblem('<svg x=1></svg>')).toMatch(/malformed attribute/);
    expect(xmlProblem('<svg x="1" x="2"></svg>')).toMatch(/repeats/);
    expect(xmlProblem('<svg/><svg/>')).toMatch(/second root/);
    expect(xmlProblem('<svg><text>a &amp; b &#8594;</text><!-- ok --></svg>')).toBeUndefined();
  });
});
