// The committed bench JSON is the source of every figure (bench/results.ts): each bench/RESULTS*.md
// is what its JSON renders, so a page edited by hand, or a JSON committed without its page, fails here.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadResults, PERF_PAGE_WRITE, renderedPages, resultPages } from '../../bench/perf-page.js';
import { RESULT_FILES, RESULT_SOURCES } from '../../bench/results.js';
import { DBOS_DIR_DEFAULT, DbosNotInstalled, dbosInstallCommand, dbosRunner } from '../../bench/steps/dbos.js';
import { read, root } from '../helpers/markdown.js';

describe('the committed bench results', () => {
  it('every source has its JSON, with the date of its run', () => {
    const results = loadResults(root) as unknown as Record<string, { date?: string }>;
    for (const source of RESULT_SOURCES)
      expect(results[source]?.date, RESULT_FILES[source]).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });

  it.each(Object.keys(resultPages(root, loadResults(root))))('%s is what its JSON renders', (page) => {
    expect(read(page), `run ${PERF_PAGE_WRITE}`).toBe(resultPages(root, loadResults(root))[page]);
  });
});

describe("a run that measured Node's CPU per job", () => {
  it('puts skiplock beside the floor on its table at K = 4, on both pages', () => {
    const results = loadResults(root);
    const node_us_per_job = {
      k1: { skiplock: 16, 'graphile-worker': 33.4 },
      k4: {
        skiplock: 7.5,
        'graphile-worker': 23.1,
        'pg-boss': 30,
        'skiplock (delete)': 8,
        'raw (skiplock schema)': 2.5,
        'raw (update)': 2,
      },
    };
    const pages = renderedPages(root, { ...results, bench: { ...results.bench, node_us_per_job } });
    expect(pages['bench/RESULTS.md']).toContain('at K = 4 skiplock 7.5 µs');
    expect(pages['bench/RESULTS.md']).toContain("skiplock's table 2.5 µs, so skiplock spends 3.00× of the floor's");
    expect(pages['bench/RESULTS.md']).toContain('K = 1: skiplock 16 µs, graphile-worker 33.4 µs');
    expect(pages['docs/performance.md']).toContain("the minimal SQL on skiplock's table 2.5 µs (skiplock 3.00× of it)");
    // A run from before the measure: the page says nothing of it.
    const { node_us_per_job: _, ...before } = results.bench as unknown as Record<string, unknown>;
    const older = renderedPages(root, { ...results, bench: before as unknown as typeof results.bench });
    expect(older['docs/performance.md']).not.toContain("Node's CPU per job");
  });
});

describe('bench:steps without DBOS Transact', () => {
  it('refuses with the command that installs it where the bench looks', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'skiplock-dbos-')), 'absent');
    const refused = await dbosRunner(dir, 'postgres://unused').catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(DbosNotInstalled);
    const message = (refused as DbosNotInstalled).message;
    expect(message).toContain(`DBOS Transact is not installed in ${dir}`);
    expect(message).toContain(dbosInstallCommand(dir));
    expect((refused as DbosNotInstalled).short).toBe(`not installed in ${dir} (install: ${dbosInstallCommand(dir)})`);
    expect(dbosInstallCommand(DBOS_DIR_DEFAULT)).toBe(
      'mkdir -p /tmp/dbos-bench && cd /tmp/dbos-bench && npm init -y && npm install @dbos-inc/dbos-sdk@5',
    );
  });
});
