/**
 * Dev probe for issue 11 item 4: the K-invocations phase alone (`node .bench/probe-k.mjs [K...]`),
 * PROBE_SYSTEMS=skiplock,raw_floor,graphile-worker (default skiplock,raw_floor), PROBE_JOBS (50,000),
 * PROBE_REPEAT (1). Prints jobs/s per system and K, plus Postgres wait events sampled during each run.
 */
import pg from 'pg';
import { freshDatabase, vacuumAnalyze } from './db.js';
import { PROCESS_SYSTEMS, type ProcessSystem } from './serverless/process.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const ks = process.argv.slice(2).map(Number);
const names = (process.env.PROBE_SYSTEMS ?? 'skiplock,raw_floor').split(',') as ProcessSystem[];
const jobs = Number(process.env.PROBE_JOBS ?? 50_000);
const repeat = Number(process.env.PROBE_REPEAT ?? 1);
/** Index entries read so far on the database's tables (the statistics lag by up to half a second). */
async function indexReads(url: string): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 600));
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query('select coalesce(sum(idx_tup_read), 0)::bigint as n from pg_stat_user_indexes');
  await client.end();
  return Number(rows[0].n);
}

for (let r = 0; r < repeat; r++) {
  for (const k of ks.length ? ks : [4, 16, 32]) {
    for (const name of names) {
      const system = PROCESS_SYSTEMS[name]();
      const url = await freshDatabase(server, 'bench_probe_k');
      await system.setup(url);
      if (process.env.PROBE_SQL) {
        const c = new pg.Client({ connectionString: url });
        await c.connect();
        await c.query(process.env.PROBE_SQL);
        await c.end();
      }
      const e0 = performance.now();
      await system.enqueueBulk(jobs, 1000);
      const enqueueMs = performance.now() - e0;
      await vacuumAnalyze(url);
      const waits = new Map<string, number>();
      const sampler = new pg.Client({ connectionString: server });
      await sampler.connect();
      let sampling = true;
      const sampling$ = (async () => {
        while (sampling) {
          const { rows } = await sampler.query(
            `select coalesce(wait_event_type || ':' || wait_event, 'cpu') as w, count(*)::int as n
             from pg_stat_activity where datname = 'bench_probe_k' and state = 'active' group by 1`,
          );
          for (const row of rows) waits.set(row.w, (waits.get(row.w) ?? 0) + row.n);
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      })();
      const reads0 = await indexReads(url);
      const cpu0 = process.cpuUsage();
      const t = performance.now();
      await system.process(k);
      const ms = performance.now() - t;
      const cpu = process.cpuUsage(cpu0);
      const reads = (await indexReads(url)) - reads0;
      sampling = false;
      await sampling$;
      await sampler.end();
      await system.teardown();
      const top = [...waits]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 5)
        .map(([w, n]) => `${w}=${n}`)
        .join(' ');
      console.log(
        `K=${k} ${name}: ${Math.round(jobs / (ms / 1000))} jobs/s (${ms.toFixed(0)} ms; enqueued ${Math.round(jobs / (enqueueMs / 1000))}/s; node cpu ${((cpu.user + cpu.system) / 1000 / ms).toFixed(2)} cores, index entries/job ${(reads / jobs).toFixed(1)})  waits: ${top}`,
      );
    }
  }
}
