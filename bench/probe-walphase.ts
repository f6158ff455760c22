/**
 * Dev probe: the bench's WAL phase alone (bench/run.ts phase 5), skiplock's keep mode and the floor
 * on its table in turn, `rounds` times in one process (`node .bench/probe-walphase.mjs [rounds]`,
 * ONLY=keep|floor for one of them). The first round runs cold; the bench measures WAL in a warm
 * process, where more updates move their row (bench/history.md item 38). Each line gives the LSNs
 * of the lifecycle, for `pg_waldump --stats=record` (set wal_keep_size first, or the segments go).
 */
import { freshDatabase, walBytes, withClient } from './db.js';
import { rawSchemaSystem } from './systems/raw-schema.js';
import { skiplockSystem } from './systems/skiplock.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const rounds = Number(process.argv[2] ?? 3);
const N = 10_000;
const all = {
  keep: () => skiplockSystem(500, 'keep'),
  floor: () => rawSchemaSystem(500),
};
const only = process.env.ONLY as keyof typeof all | undefined;
const makers = only ? { [only]: all[only] } : all;
const lsn = (url: string) =>
  withClient(url, async (c) => String((await c.query('select pg_current_wal_lsn() l')).rows[0].l));

for (let r = 0; r < rounds; r++) {
  const line: string[] = [];
  for (const [name, make] of Object.entries(makers)) {
    const system = make();
    const url = await freshDatabase(server, 'bench_probe');
    await system.setup(url);
    let range = '';
    let ms = 0;
    const bytes = await walBytes(url, async () => {
      range = await lsn(url);
      await system.enqueueBulk(N, 1000);
      const t = performance.now();
      await system.process(4);
      ms = performance.now() - t;
      range += ` ${await lsn(url)}`;
    });
    await system.teardown();
    line.push(`${name} ${Math.round(bytes / N)} B/job (${Math.round(ms)} ms) [${range}]`);
  }
  console.log(line.join('  '));
}
process.exit(0);
