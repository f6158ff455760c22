// Every performance figure of README.md and docs/ comes from the JSON the benches commit (SPEC §11,
// "Figures in the docs come from the tools"): either in a block rendered from it, or as a link whose
// title names its key, `[1.22×](performance.md#the-last-full-run "bench: process_k4.skiplock ÷
// process_k4.graphile-worker")`. A figure that disagrees with the JSON fails, and so does one that
// looks like a measurement and names no key (test/helpers/perf-figures.ts says what looks like one).
import { describe, expect, it } from 'vitest';
import { blocksOf, DOC_BLOCKS, loadResults, PERF_PAGE_WRITE, PERFORMANCE_PAGE } from '../../bench/perf-page.js';
import { RESULT_COMMANDS } from '../../bench/results.js';
import { DBOS_DIR_DEFAULT, dbosInstallCommand } from '../../bench/steps/dbos.js';
import pkg from '../../package.json' with { type: 'json' };
import { pages, read, root } from '../helpers/markdown.js';
import { agrees, checkFigures, figureRegions, type Records, resolve } from '../helpers/perf-figures.js';

const records = () => loadResults(root) as unknown as Records;

describe('performance figures in the docs', () => {
  it.each(pages)('%s: every figure is the committed JSON’s, and linked to its key', (page) => {
    expect(checkFigures(read(page), records()).problems).toEqual([]);
  });

  it('the figures are quoted where a reader looks for them: the README, performance.md and the pages beside it', () => {
    const marked = Object.fromEntries(pages.map((page) => [page, checkFigures(read(page), records()).marked.length]));
    expect(marked['README.md']).toBeGreaterThanOrEqual(7);
    expect(marked[PERFORMANCE_PAGE]).toBeGreaterThanOrEqual(15);
    for (const page of ['docs/cost.md', 'docs/drivers.md', 'docs/deploy-lambda.md', 'docs/reliability.md'])
      expect(marked[page], page).toBeGreaterThan(0);
  });

  it(`every generated block is what its JSON renders (${PERF_PAGE_WRITE})`, () => {
    const results = loadResults(root);
    const seen: string[] = [];
    for (const page of pages) {
      for (const block of blocksOf(read(page))) {
        if (block.name === 'figures') continue;
        const known = DOC_BLOCKS[block.name];
        expect(
          known,
          `${page}:${block.start}: <!-- ${block.name} --> is no block bench/perf-page.ts renders`,
        ).toBeDefined();
        expect(known?.page, `${page}:${block.start}`).toBe(page);
        expect(block.from, `${page}:${block.start}`).toBe(known?.from);
        expect(block.body, `${page}:${block.start}: run ${PERF_PAGE_WRITE}`).toBe(known?.render(results));
        seen.push(block.name);
      }
    }
    expect(seen.sort()).toEqual(Object.keys(DOC_BLOCKS).sort());
  });

  it('a region of another tool’s output names an npm script of this package that is not a bench, and is closed', () => {
    const regions = pages.flatMap((page) => figureRegions(read(page)).map((r) => ({ page, ...r })));
    expect(regions.length).toBeGreaterThan(0);
    for (const { page, line, command } of regions) {
      const script = /^npm run ([\w:-]+)$/.exec(command)?.[1];
      expect(script && script in pkg.scripts, `${page}:${line}: "${command}"`).toBe(true);
      expect(script?.startsWith('bench'), `${page}:${line}: bench figures are linked to their JSON`).toBe(false);
      const block = blocksOf(read(page)).find((b) => b.name === 'figures' && b.start === line);
      expect(block?.body.trim().startsWith('|'), `${page}:${line}: a closed region holding a table`).toBe(true);
    }
  });

  it('performance.md says how to run each bench, and how to install DBOS for bench:steps', () => {
    const page = read(PERFORMANCE_PAGE);
    for (const command of Object.values(RESULT_COMMANDS).filter((c) => !c.includes('--soak')))
      expect(page).toContain(`\`${command}`);
    expect(page).toContain(dbosInstallCommand(DBOS_DIR_DEFAULT));
    expect(page).toContain(PERF_PAGE_WRITE);
  });
});

describe('the figure checker', () => {
  const json: Records = {
    bench: {
      date: '2026-11-29',
      process_k4: { skiplock: 51_903, 'graphile-worker': 42_666 },
      raw_floor_k4: 90_400,
    },
    serverless: { bursts: [{ label: 'pg', seconds: 5.65, idealSeconds: 5 }], nudge: { nudge: { p50: 6.3 } } },
  };
  const problems = (text: string, with_ = json) => checkFigures(text, with_).problems;

  it('passes a figure that reads as its key, rounded to the decimals it is written with', () => {
    const page = [
      'K = 4: [51,903 jobs/s](performance.md "bench: process_k4.skiplock"), [1.22×](performance.md "bench: process_k4.skiplock ÷ process_k4.graphile-worker") graphile-worker,',
      '[57%](performance.md "bench: process_k4.skiplock ÷ raw_floor_k4") of the floor; a burst drained in [1.13×](x.md "serverless: bursts.pg.seconds ÷ bursts.pg.idealSeconds")',
      'the ideal, a nudge in [6.3 ms](x.md "serverless: nudge.nudge.p50") (p50), run of [2026-11-29](x.md "bench: date").',
    ].join('\n');
    expect(checkFigures(page, json)).toEqual({ marked: expect.any(Array), problems: [] });
    expect(checkFigures(page, json).marked).toHaveLength(6);
  });

  it('fails a figure that disagrees with the JSON, and one whose key is not in it', () => {
    expect(problems('[51,904 jobs/s](performance.md "bench: process_k4.skiplock")')).toEqual([
      '1: [51,904 jobs/s] disagrees with bench: process_k4.skiplock: 51903',
    ]);
    expect(problems('[1.21×](p.md "bench: process_k4.skiplock ÷ process_k4.graphile-worker")')).toEqual([
      '1: [1.21×] disagrees with bench: process_k4.skiplock ÷ process_k4.graphile-worker: 1.2165',
    ]);
    expect(problems('[2026-11-26](p.md "bench: date")')).toHaveLength(1);
    expect(problems('[1 ms](p.md "bench: process_k4.nobody")')).toEqual(['1: [1 ms] — bench has no process_k4.nobody']);
    expect(problems('[1 ms](p.md "soak: keep")')).toEqual(['1: [1 ms] — no source "soak"']);
  });

  it('fails the committed performance page when a figure of its JSON changes', () => {
    const committed = records();
    const page = read(PERFORMANCE_PAGE);
    expect(checkFigures(page, committed).problems).toEqual([]);
    const bench = committed.bench as Record<string, unknown>;
    const changed = {
      ...committed,
      bench: { ...bench, raw_schema_floor_k4: (bench.raw_schema_floor_k4 as number) * 0.9 },
    };
    const found = checkFigures(page, changed).problems;
    expect(found.length).toBeGreaterThanOrEqual(2); // the schema floor ÷ the floor, skiplock ÷ the schema floor
    expect(found.every((p) => p.includes('raw_schema_floor_k4'))).toBe(true);
  });

  it('flags what reads as a measurement and names no key', () => {
    const page = [
      'Processing runs at 51,903 jobs/s, 1.22× graphile-worker; 300 events a second.',
      '',
      'A claim costs 53.6 µs per job.',
      '',
      'Measured: `skiplock stats` answers in 14 ms (75 ms before).',
      '',
      'The burst drains in 5.65 s, 1.13× [the ideal](x.md).',
      '',
      '| run | drain |',
      '| --- | --- |',
      '| pg, p50 | 6.3 ms |',
    ].join('\n');
    expect(problems(page).map((p) => /"(.*?)"/.exec(p)?.[1])).toEqual([
      '51,903 jobs/s',
      '300 events a second',
      '1.22×',
      '53.6 µs',
      '14 ms',
      '75 ms',
      '1.13×',
      '5.65 s',
      '6.3 ms',
    ]);
  });

  it('leaves settings, code, comments and generated blocks alone', () => {
    const page = [
      'A lease of 30 s; the default timeout is 1000 ms, and a nudge waits up to 1 s.',
      '',
      '| option | default |',
      '| --- | --- |',
      '| `timeoutMs` | 30 s; the p95 of its measured durations |',
      '',
      'Measured: `a 14 ms claim` and <!-- 6 ms --> nothing else. HTTP 500s are retried.',
      '',
      '```',
      'measured 51,903 jobs/s, 1.22×',
      '```',
      '',
      '<!-- full-run: bench/RESULTS.json -->',
      '| process, K = 4, jobs/s | 51,903 | 1.22× |',
      '<!-- /full-run -->',
      '',
      '<!-- figures: npm run drill -->',
      '| drain after it recovered, p99 | 5.5 s |',
      '<!-- /figures -->',
    ].join('\n');
    expect(problems(page)).toEqual([]);
  });

  it('reads a figure as its value rounded to the decimals written, a percentage as a hundredth', () => {
    expect(agrees('1.22×', 51_903 / 42_666)).toBe(true);
    expect(agrees('1.2×', 51_903 / 42_666)).toBe(true);
    expect(agrees('1.21×', 51_903 / 42_666)).toBe(false);
    expect(agrees('57%', 0.5741)).toBe(true);
    expect(agrees('30,002.9 ms', 30_002.9)).toBe(true);
    expect(agrees('5 to 6 s', 5)).toBe(false);
    expect(resolve(json, 'serverless: bursts.0.seconds')).toEqual({ value: 5.65 });
    expect(resolve(json, 'bench: process_k4.skiplock ÷ 1000')).toEqual({ value: 51.903 });
  });
});
