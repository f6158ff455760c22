import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { probeTable, runProbe } from '../../chaos/probe.js';
import { databaseUrl, testDriver } from '../helpers/db.js';

// The fault probe on the driver under test: every operation under every fault, armed one at a time
// on its own statement in the driver's stand-in. Every guarantee holds, every fault met its
// statement, and docs/reliability.md shows exactly the table the probe prints.
describe(`the fault probe (${testDriver()})`, () => {
  it("holds every guarantee under every fault, and the reliability page shows the probe's own table", async () => {
    const report = await runProbe({ driver: testDriver(), databaseUrl: databaseUrl() });
    const broken = report.rows
      .filter((r) => !r.held || !r.fired)
      .map((r) => `${r.scenario} / ${r.mode}: ${r.why ?? 'not fired'}`);
    expect(broken).toEqual([]);
    expect(report.line).toMatch(/violations=0 unfired=0$/);
    const page = readFileSync(new URL('../../docs/reliability.md', import.meta.url), 'utf8');
    expect(page).toContain(probeTable(report));
  }, 300_000);
});
