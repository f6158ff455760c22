import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DOC_BLOCKS, loadResults } from '../../bench/perf-page.js';
import type { BurstResult } from '../../bench/serverless/burst.js';
import { renderServerlessReport, type ServerlessReport } from '../../bench/serverless/report.js';

const root = new URL('../../', import.meta.url).pathname;
const committed = () => JSON.parse(readFileSync(`${root}bench/RESULTS.serverless.json`, 'utf8')) as ServerlessReport;

/** The committed run as a run before the slow link recorded it: no burst with an added round trip. */
const beforeSlowLink = (): ServerlessReport => {
  const report = committed();
  return { ...report, bursts: report.bursts.filter((b) => !b.addedRoundTripMs) };
};
const plainNeon = () => beforeSlowLink().bursts.find((b) => b.label === 'neon-http') as BurstResult;
const ratio = (b: BurstResult) => (b.seconds / b.idealSeconds).toFixed(2);

/** That run with a burst over a slow link added, as `--rtt 20` records it. */
const withSlowLink = (): ServerlessReport => {
  const report = beforeSlowLink();
  const neon = report.bursts.find((b) => b.label === 'neon-http') as BurstResult;
  const slow: BurstResult = {
    ...neon,
    label: 'neon-http +20 ms',
    addedRoundTripMs: 20,
    seconds: 6.1,
    statementsPerJob: 0.21,
  };
  return { ...report, bursts: [...report.bursts, slow] };
};

describe('the serverless report and the bursts over a slow link (issue 41)', () => {
  it('renders a run recorded before the slow link without it, and with the issue 41 target', () => {
    const page = renderServerlessReport(beforeSlowLink());
    expect(page).not.toContain('Over a slow link');
    const neon = plainNeon();
    const met = neon.seconds / neon.idealSeconds <= 1.25 ? 'yes' : 'no';
    const floor = committed().burstFloors.find((f) => f.transport === 'neon-http');
    expect(floor).toBeDefined();
    const { seconds, idealSeconds } = floor as { seconds: number; idealSeconds: number };
    expect(page).toContain(
      `| burst drain (neon-http) ≤ 1.25× ideal (issue 41) | ${ratio(neon)}× (${neon.seconds} s; its floor ${(seconds / idealSeconds).toFixed(2)}× the ideal, skiplock ÷ the floor ${(neon.seconds / seconds).toFixed(2)}×) | ${met} |`,
    );
  });

  it('states the issue 41 target without the floor when a run has none over HTTP', () => {
    const report = beforeSlowLink();
    const page = renderServerlessReport({
      ...report,
      burstFloors: report.burstFloors.filter((f) => f.transport === 'pg'),
    });
    const neon = plainNeon();
    expect(page).toContain(
      `| burst drain (neon-http) ≤ 1.25× ideal (issue 41) | ${ratio(neon)}× (${neon.seconds} s) |`,
    );
  });

  it('renders each slow-link burst as a row of the table and beside the same driver on the plain link', () => {
    const page = renderServerlessReport(withSlowLink());
    expect(page).toMatch(/^\| neon-http \+20 ms \| 6\.1 s \| 5 s \| 1\.22× \|/m);
    expect(page).toContain(
      `neon-http +20 ms: 1.22× the ideal, 0.21 statements per job (neon-http: ${ratio(plainNeon())}×`,
    );
  });

  it('puts the slow-link bursts on the performance page beside the plain ones', () => {
    const results = { ...loadResults(root), serverless: withSlowLink() };
    const block = (DOC_BLOCKS.serverless as { render: (r: typeof results) => string }).render(results);
    expect(block).toMatch(/fan-out to 20 invocations, neon-http \+20 ms \| 6\.1 s \(1\.22×\) \| – \| 5 s \|/);
    expect(renderServerlessReport(beforeSlowLink())).not.toContain('+20 ms');
  });
});
