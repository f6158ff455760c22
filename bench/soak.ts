import { randomUUID } from 'node:crypto';
import pg from 'pg';
import * as z from 'zod';
import type { Completion } from '../base/outcomes.js';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { connect, type SkiplockDb } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { claimJobs } from '../db/statements/claim.js';

/**
 * The soak phase: a steady load (an enqueuer at `ratePerS`, two claim-and-settle loops with the
 * worker's own statement, batches of 10) for `periods` periods with no VACUUM — as a table whose
 * autovacuum lags — then a VACUUM and `vacuumedPeriods` more. Each period (a minute; 30 s with
 * --quick): claims, their p50, and
 * the entries each claim read from jobs_lease_idx (pg_stat_user_indexes), where every finished
 * job leaves a dead entry that the claim's rescue looks through once its lease time has passed.
 * Leases are short (10 s) so the dead entries enter that range within the first minute.
 */
export interface SoakPeriod {
  /** Seconds since the load started, at the end of this period. */
  at_s: number;
  vacuumed: boolean;
  claims: number;
  claim_p50_ms: number;
  entries_per_claim: number;
  jobs: number;
}

export interface SoakResult {
  claim_p50_ms_vacuumed: number;
  claim_p50_ms_unvacuumed: number;
  entries_per_claim_unvacuumed: number;
  jobs_per_s: number;
  per_period: SoakPeriod[];
}

export interface SoakOptions {
  url: string;
  completion: Completion;
  periods: number;
  vacuumedPeriods: number;
  periodMs: number;
  ratePerS: number;
  progress?: (line: string) => void;
}

/** 12 minutes a mode: 10 without VACUUM, 2 after one. */
export const SOAK_FULL = { periods: 10, vacuumedPeriods: 2, periodMs: 60_000, ratePerS: 200 } as const;
/** 2 minutes a mode. */
export const SOAK_QUICK = { periods: 3, vacuumedPeriods: 1, periodMs: 30_000, ratePerS: 200 } as const;

const LEASE_MS = 10_000;
const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const p50 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const schema = `soak_${options.completion}`;
  const admin = new pg.Pool({ connectionString: options.url, max: 2 });
  const setup = connect({ connectionString: options.url, max: 2 });
  const loops = [0, 1].map(() => connect({ connectionString: options.url, max: 1 }));
  const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
  const enqueuer = createEnqueuer({ schema });
  try {
    await admin.query(`drop schema if exists "${schema}" cascade`);
    await migrate(setup, { schema });
    // The production settings of the table would let autovacuum run here; this phase is about
    // claims while it has not (this machine's autovacuum is off, and so it is for this table).
    await admin.query(`alter table "${schema}".jobs set (autovacuum_enabled = false)`);
    let stop = false;
    let vacuumed = false;
    const claims: { at: number; ms: number; jobs: number; vacuumed: boolean }[] = [];

    const enqueue = (async () => {
      const perTick = Math.max(1, Math.round(options.ratePerS / 10));
      for (let n = 0, next = Date.now(); !stop; next += 100) {
        await enqueuer.enqueueMany(
          setup,
          Array.from({ length: perTick }, () => noop.with({ n: n++ })),
        );
        await wait(Math.max(0, next + 100 - Date.now()));
      }
    })();
    const claimLoop = async (db: SkiplockDb) => {
      let settle: { id: string; leaseToken: string; outcome: 'completed' }[] = [];
      while (!stop) {
        const started = performance.now();
        const result = await claimJobs(db.executor, schema, {
          leases: [{ kind: 'noop', leaseMs: LEASE_MS }],
          limit: 10,
          invocationId: randomUUID(),
          settle,
          completion: options.completion,
        });
        claims.push({ at: Date.now(), ms: performance.now() - started, jobs: settle.length, vacuumed });
        settle = result.jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));
        if (result.jobs.length === 0) await wait(20);
      }
    };
    const running = loops.map(claimLoop);

    const perPeriod: SoakPeriod[] = [];
    const leaseReads = async () =>
      Number(
        (
          await admin.query(
            `select idx_tup_read::bigint as n from pg_stat_user_indexes where schemaname = $1 and indexrelname = 'jobs_lease_idx'`,
            [schema],
          )
        ).rows[0]?.n ?? 0,
      );
    const started = Date.now();
    let reads = await leaseReads();
    for (let p = 1; p <= options.periods + options.vacuumedPeriods; p++) {
      const from = Date.now();
      if (!vacuumed && p > options.periods) {
        await admin.query(`vacuum "${schema}".jobs`);
        vacuumed = true;
      }
      await wait(options.periodMs - (Date.now() - from));
      const now = Date.now();
      const inPeriod = claims.filter((c) => c.at > from && c.at <= now);
      const readsNow = await leaseReads();
      perPeriod.push({
        at_s: Math.round((now - started) / 1000),
        vacuumed,
        claims: inPeriod.length,
        claim_p50_ms: Math.round(p50(inPeriod.map((c) => c.ms)) * 100) / 100,
        entries_per_claim: Math.round((readsNow - reads) / Math.max(1, inPeriod.length)),
        jobs: inPeriod.reduce((n, c) => n + c.jobs, 0),
      });
      reads = readsNow;
      options.progress?.(`  soak ${options.completion}: ${JSON.stringify(perPeriod.at(-1))}`);
    }
    stop = true;
    await Promise.all([enqueue, ...running]);
    const lastUnvacuumed = [...perPeriod].reverse().find((m) => !m.vacuumed);
    const lastVacuumed = perPeriod.at(-1);
    return {
      claim_p50_ms_vacuumed: lastVacuumed?.vacuumed ? lastVacuumed.claim_p50_ms : 0,
      claim_p50_ms_unvacuumed: lastUnvacuumed?.claim_p50_ms ?? 0,
      entries_per_claim_unvacuumed: lastUnvacuumed?.entries_per_claim ?? 0,
      jobs_per_s: Math.round(perPeriod.reduce((n, m) => n + m.jobs, 0) / ((Date.now() - started) / 1000)),
      per_period: perPeriod,
    };
  } finally {
    await admin.query(`drop schema if exists "${schema}" cascade`).catch(() => {});
    await Promise.all([setup.close(), ...loops.map((db) => db.close()), admin.end()]);
  }
}
