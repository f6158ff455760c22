// The committed bench JSON is the source of every figure (bench/results.ts): each bench/RESULTS*.md
// is what its JSON renders, so a page edited by hand, or a JSON committed without its page, fails here.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadResults, PERF_PAGE_WRITE, resultPages } from '../../bench/perf-page.js';
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
