// The batch_handler phase renders pg-boss beside skiplock when a run measured it, and a record
// written before it did (the committed bench/RESULTS.json until the next full run) as before.
import { describe, expect, it } from 'vitest';
import { type BatchHandlerFigures, batchHandlerSection } from '../../bench/batch-handler.js';
import { pgBossSettings } from '../../bench/batch-handler-pgboss.js';
import { batchHandlersLine, DOC_BLOCKS, loadResults } from '../../bench/perf-page.js';
import { renderResultsPage } from '../../bench/report.js';
import { root } from '../helpers/markdown.js';

const skiplockOnly: BatchHandlerFigures = {
  concurrency: 10,
  batchSize: 100,
  bulkApi: { fixedMs: 20, perItemMs: 0.1 },
  jobs: { noop: 50_000, bulk_api: 5_000 },
  noop: { single: 7_405, batch: 60_654, ratio: 8.2 },
  bulk_api: { single: 452, batch: 19_480, ratio: 43.1 },
};
const withPeer: BatchHandlerFigures = {
  ...skiplockOnly,
  pgboss: {
    settings: pgBossSettings(10, 100),
    noop: { single: 2_000, batch: 20_000, ratio: 10 },
    bulk_api: { single: 400, batch: 16_000, ratio: 40 },
  },
};

describe('the batch_handler section of RESULTS.md', () => {
  it('puts pg-boss’s jobs/s, its batch ratio and skiplock ÷ pg-boss beside skiplock’s', () => {
    const md = batchHandlerSection(withPeer);
    expect(md).toContain(
      '| handler | skiplock, one job per call | skiplock, batch of 100 | ratio | pg-boss, one job per call | pg-boss, batch of 100 | ratio | skiplock ÷ pg-boss, one per call / batch |',
    );
    expect(md).toContain('| no-op | 7,405 | 60,654 | 8.2× | 2,000 | 20,000 | 10× | 3.70× / 3.03× |');
    expect(md).toContain('| bulk API | 452 | 19,480 | 43.1× | 400 | 16,000 | 40× | 1.13× / 1.22× |');
    expect(md).toContain('`localConcurrency: 10`');
    expect(md).toContain('`perJobResults`');
  });

  it('renders a run without pg-boss’s figures as the skiplock-only table', () => {
    const md = batchHandlerSection(skiplockOnly);
    expect(md).toContain('| handler | one job per call, jobs/s | batch of 100, jobs/s | ratio |');
    expect(md).toContain('| no-op | 7,405 | 60,654 | 8.2× |\n| bulk API | 452 | 19,480 | 43.1× |\n');
    expect(md).not.toContain('pg-boss');
  });

  it('the whole page shows the pg-boss columns when the record has them', () => {
    const bench = loadResults(root).bench;
    expect(renderResultsPage({ ...bench, batch_handler: withPeer })).toContain(
      '| no-op | 7,405 | 60,654 | 8.2× | 2,000 | 20,000 | 10× | 3.70× / 3.03× |',
    );
    expect(renderResultsPage({ ...bench, batch_handler: skiplockOnly })).not.toContain('pg-boss, batch of 100');
  });
});

describe('the batch-handler line of docs/performance.md', () => {
  it('quotes pg-boss’s own batch handler beside skiplock’s, and skiplock ÷ pg-boss', () => {
    const line = batchHandlersLine(withPeer);
    expect(line).toContain('(concurrency 10, the same for pg-boss)');
    expect(line).toContain(
      "no-op jobs 60,654 against 7,405 jobs/s (8.2×); pg-boss's own batch handler (`batchSize` 100 against 1), 20,000 against 2,000 jobs/s (10×), skiplock's batches at 3.03× pg-boss's rate;",
    );
    expect(line).toContain("16,000 against 400 jobs/s (40×), skiplock's batches at 1.22× pg-boss's rate.");
  });

  it('says the peers were not measured when the record predates them', () => {
    const line = batchHandlersLine(skiplockOnly);
    expect(line).toBe(
      '- **Batch handlers** (concurrency 10; not measured for the peers): a batch of 100 against one job per call, no-op jobs 60,654 against 7,405 jobs/s (8.2×); calling a bulk API of 20 ms + 0.1 ms an item, 19,480 against 452 jobs/s (43.1×).',
    );
  });

  it('the full-run block carries it', () => {
    const results = loadResults(root);
    const block = DOC_BLOCKS['full-run']?.render({ ...results, bench: { ...results.bench, batch_handler: withPeer } });
    expect(block).toContain(batchHandlersLine(withPeer));
  });
});
