import { describe, expect, it } from 'vitest';
import { issue25Section } from '../../bench/report-issue25.js';

// Run 18's figures (bench/RESULTS.md, 2026-11-26), the shape run.ts records them in.
const run18 = {
  process_k1: { skiplock: 49_412, 'graphile-worker': 58_855 },
  process_k4: { skiplock: 69_085, 'graphile-worker': 60_874 },
  process_k16: { skiplock: 53_855, 'graphile-worker': 59_021 },
  skiplock_delete: { process_k4: 83_554, wal_bytes_per_job: 984 },
  skiplock_default_pool_k1: 62_971,
  raw_floor_k4: 118_488,
  raw_floor_k16: 85_855,
  raw_schema_floor_k4: 94_109,
  raw_floor_delete_k4: 157_726,
  enqueue_bulk: { skiplock: 97_577, 'graphile-worker': 90_613 },
  wal_bytes_per_job: { skiplock: 1_269, 'graphile-worker': 1_015 },
  wal_raw_schema_bytes_per_job: 1_226,
  wal_fillfactor_30_bytes_per_job: 1_218,
  bundle_bytes: 305_093,
  cold_import_ms: { worker: 19.4, bare: 3.4 },
  soak: {
    keep: { claim_p50_ms_vacuumed: 1.23, claim_p50_ms_unvacuumed: 1.48 },
    delete: { claim_p50_ms_vacuumed: 1.18, claim_p50_ms_unvacuumed: 1.21 },
  },
};
const verdict = (md: string, target: string) =>
  md
    .split('\n')
    .find((l) => l.startsWith(`| ${target}`))
    ?.split('|')[3]
    ?.trim();

describe("the bench report's issue 25 targets", () => {
  it('says met, missed, or missed as far as the floor is, per target', () => {
    const md = issue25Section(run18);
    expect(verdict(md, 'keep mode, K = 4 ≥ 1.3×')).toBe('no');
    expect(verdict(md, 'K = 1 on the default pool')).toBe('yes');
    // 0.78× of its K = 4 against the raw floor's own 0.72×.
    expect(verdict(md, 'K = 16 ≥ K = 4')).toBe('no — held by the floor');
    expect(verdict(md, 'K = 16 ≥ graphile-worker')).toBe('no');
    expect(verdict(md, 'delete mode, K = 4 ≥ 1.5×')).toBe('no');
    expect(verdict(md, 'bulk enqueue')).toBe('yes');
    expect(verdict(md, 'WAL per lifecycle, delete mode')).toBe('yes');
    // 1,269 bytes: 1.25× graphile-worker, within 5 % of the 1,226 the floor on skiplock's table wrote.
    expect(verdict(md, 'WAL per lifecycle, keep mode')).toBe('no — held by the floor');
    expect(verdict(md, 'soak, keep')).toBe('yes');
    expect(verdict(md, 'worker bundle')).toBe('yes');
    expect(verdict(md, 'cold import')).toBe('yes');
  });

  it('does not credit the floor when skiplock falls further than it', () => {
    const md = issue25Section({
      ...run18,
      process_k16: { skiplock: 40_000, 'graphile-worker': 59_021 },
      wal_bytes_per_job: { skiplock: 1_400, 'graphile-worker': 1_015 },
    });
    expect(verdict(md, 'K = 16 ≥ K = 4')).toBe('no');
    expect(verdict(md, 'WAL per lifecycle, keep mode')).toBe('no');
  });

  it('marks a target met when the figure reaches it', () => {
    const md = issue25Section({ ...run18, process_k4: { skiplock: 80_000, 'graphile-worker': 60_874 } });
    expect(verdict(md, 'keep mode, K = 4 ≥ 1.3×')).toBe('yes');
    expect(verdict(md, 'delete mode, K = 4 ≥ 1.5×')).toBe('no');
  });
});
