import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EXIT, runCli } from '../../cli/run.js';
import { connect } from '../../db/connect.js';
import { claimJobs } from '../../db/statements/claim.js';
import { settleJobs } from '../../db/statements/settle.js';
import { cliOn } from '../helpers/cli.js';

const schema = `cli_${randomBytes(4).toString('hex')}`;
let admin: pg.Pool;

const cli = cliOn(schema);
const JOBS = ['--jobs', 'test/helpers/cli-jobs.ts'];
const card = { orderId: 7, apiKey: 'sk_live_SECRET123', card: { number: '4242424242424242', last4: '4242' } };

let db: ReturnType<typeof connect> | undefined;
/** A connection for claiming directly, as a worker would. */
const conn = () => {
  db ??= connect({ connectionString: inject('databaseUrl') });
  return db;
};

beforeAll(async () => {
  admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
});
afterAll(async () => {
  await db?.close();
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await admin.end();
});

describe('skiplock CLI against a real database', () => {
  it('explains itself, and a usage error exits 2', async () => {
    expect((await cli('--help')).out).toMatch(/usage: skiplock <command>/);
    const bad = await cli('frobnicate');
    expect(bad).toMatchObject({ code: EXIT.usage });
    expect(bad.err).toMatch(/unknown command "frobnicate"/);
    expect((await cli('jobs', 'show', 'x1')).code).toBe(EXIT.usage);
  });

  it('reports a missing migration and an unreachable database clearly (exit 3), no URL (exit 4)', async () => {
    const notMigrated = await cli('stats');
    expect(notMigrated.code).toBe(EXIT.database);
    expect(notMigrated.err).toMatch(/is not migrated; run `npx skiplock migrate`/);
    const down = await runCli(['stats', '--database-url', 'postgres://u:hunter2pw@127.0.0.1:1/db'], {
      env: {},
      out: () => {},
      err: (t) => {
        expect(t).not.toContain('hunter2pw');
      },
    });
    expect(down).toBe(EXIT.database);
    expect(await runCli(['stats'], { env: {}, out: () => {}, err: () => {} })).toBe(EXIT.config);
    // With --json a failure is one JSON document too, as operations.md says of every command.
    const out: string[] = [];
    const failed = await runCli(['stats', '--json', '--database-url', 'postgres://u:hunter2pw@127.0.0.1:1/db'], {
      env: {},
      out: (t) => out.push(t),
      err: () => {},
    });
    expect(failed).toBe(EXIT.database);
    expect(JSON.parse(out.join('\n'))).toMatchObject({
      error: { code: 'database_unreachable', message: expect.stringMatching(/^cannot reach the database: /) },
    });
    expect(out.join('\n')).not.toContain('hunter2pw');
  });

  it('migrate, then enqueue through the job kinds (validated; exit 2 on a bad payload)', async () => {
    expect((await cli('migrate', '--json')).out).toContain('"applied"');
    const ok = await cli(
      'enqueue',
      'charge-card',
      '--payload',
      JSON.stringify(card),
      '--correlation-id',
      'order-7',
      ...JOBS,
    );
    expect(ok).toMatchObject({ code: EXIT.ok, out: 'inserted job 1' });
    const json = JSON.parse(
      (await cli('enqueue', 'ping', '--payload', '{"n":1}', '--dedupe-key', 'p', '--json', ...JOBS)).out,
    );
    expect(json).toEqual({ id: '2', outcome: 'inserted' });
    const bad = await cli('enqueue', 'ping', '--payload', '{"n":"x"}', ...JOBS);
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.err).toMatch(/invalid payload for ping/);
    expect((await cli('enqueue', 'ping', '--payload', '{"n":1}')).err).toMatch(/pass --jobs/);
  });

  it('stats (table and JSON) and jobs list', async () => {
    const human = await cli('stats');
    expect(human.out).toMatch(/queue\s+kind\s+ready/);
    expect(human.out).toMatch(/payments\s+charge-card\s+1/);
    expect(human.out).toMatch(/last 300 s:/);
    const { depth, activity } = JSON.parse((await cli('stats', '--json', '--window', '60')).out);
    expect(depth).toEqual(
      expect.arrayContaining([expect.objectContaining({ queue: 'payments', kind: 'charge-card', ready: 1 })]),
    );
    expect(activity).toEqual({ windowSeconds: 60, rows: [] });
    const list = JSON.parse((await cli('jobs', 'list', '--kind', 'ping', '--json')).out);
    expect(list).toEqual([expect.objectContaining({ id: '2', kind: 'ping', state: 'queued' })]);
  });

  it('jobs show masks sensitive fields, in human and JSON output', async () => {
    const human = await cli('jobs', 'show', '1', ...JOBS);
    expect(human.out).toContain('"apiKey":"***"');
    expect(human.out).toContain('"last4":"4242"');
    const json = await cli('jobs', 'show', '1', '--json', ...JOBS);
    expect(JSON.parse(json.out).payload).toEqual({ orderId: 7, apiKey: '***', card: { number: '***', last4: '4242' } });
    for (const output of [human.out, json.out]) {
      expect(output).not.toContain('sk_live_SECRET123');
      expect(output).not.toContain('4242424242424242');
    }
    expect((await cli('jobs', 'show', '999')).code).toBe(EXIT.refused);
  });

  it("jobs why names a job's holds (a paused queue), or says it is ready; --json gives the same", async () => {
    const ready = await cli('jobs', 'why', '2', ...JOBS);
    expect(ready.code).toBe(EXIT.ok);
    expect(ready.out).toMatch(/^ready: \d+ ready job\(s\) of queue \S+ are ahead of it$/m);
    const { rows } = await admin.query(`select queue from "${schema}".jobs where id = 2`);
    await admin.query(
      `insert into "${schema}".pauses (scope, name, paused_at, paused_by, reason) values ('queue', $1, now(), 'ops', 'incident')`,
      [rows[0].queue],
    );
    const held = await cli('jobs', 'why', '2', ...JOBS);
    expect(held.out).toMatch(
      new RegExp(`^- paused: its queue ${rows[0].queue} is paused since .* by ops \\(incident\\)`, 'm'),
    );
    const json = JSON.parse((await cli('jobs', 'why', '2', '--json', ...JOBS)).out);
    expect(json).toMatchObject({ id: '2', ready: false, holds: [{ reason: 'paused' }] });
    await admin.query(`delete from "${schema}".pauses`);
    expect((await cli('jobs', 'why', '999')).code).toBe(EXIT.refused);
  });

  it('jobs show prints the progress and the result a job stored', async () => {
    await admin.query(
      `update "${schema}".jobs set progress = '{"page":3}', result = '{"messageId":"m-1"}' where id = 2`,
    );
    const human = await cli('jobs', 'show', '2');
    expect(human.out).toMatch(/^progress: \{"page":3\}$/m);
    expect(human.out).toMatch(/^result: \{"messageId":"m-1"\}$/m);
    expect(JSON.parse((await cli('jobs', 'show', '2', '--json')).out)).toMatchObject({ result: { messageId: 'm-1' } });
    await admin.query(`update "${schema}".jobs set progress = null, result = null where id = 2`);
    expect((await cli('jobs', 'show', '2')).out).not.toMatch(/^result:/m);
  });

  it('enqueue --after makes a job wait for others; jobs show prints both ends', async () => {
    const child = JSON.parse(
      (
        await cli(
          'enqueue',
          'ping',
          '--payload',
          '{"n":5}',
          '--after',
          '1',
          '--on-parent-failure',
          'run',
          '--json',
          ...JOBS,
        )
      ).out,
    ) as { id: string };
    // A job parked until others end (here, or behind an ordering key) has no run-at date to print.
    const shown = await cli('jobs', 'show', child.id);
    expect(shown.out).toMatch(/; waiting for the jobs before it to end;/);
    expect((await cli('jobs', 'list')).out).toMatch(new RegExp(`^${child.id} +ping .* waiting`, 'm'));
    expect(shown.out).toMatch(/^waits for: 1 \(if one dies or is cancelled: run\)$/m);
    expect((await cli('jobs', 'show', '1')).out).toMatch(new RegExp(`^waited for by: ${child.id}$`, 'm'));
    const bad = await cli('enqueue', 'ping', '--payload', '{"n":5}', '--after', '1,x', ...JOBS);
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.err).toMatch(/after: "x" is not a job id/);
    // The rest of this file counts the jobs it made before.
    await admin.query(`delete from "${schema}".jobs where id = $1`, [child.id]);
    await admin.query(`update "${schema}".jobs set dependents = null where id = 1`);
  });

  it('dlq list and dlq replay (dry run, by id, refused when not dead), cancel and retry', async () => {
    // Kill job 2 through the real statements.
    const db = connect({ connectionString: inject('databaseUrl') });
    const { jobs } = await claimJobs(db.executor, schema, {
      leases: [{ kind: 'ping', leaseMs: 10_000 }],
      limit: 1,
      invocationId: 'x',
    });
    await settleJobs(db.executor, schema, [
      {
        id: '2',
        leaseToken: jobs[0]!.leaseToken,
        outcome: 'dead',
        reason: 'http_4xx',
        error: { class: 'E', message: 'gone' },
      },
    ]);
    await db.close();
    const dlq = await cli('dlq', 'list');
    expect(dlq.out).toMatch(/2\s+ping\s+default\s+http_4xx/);
    expect(dlq.out).toContain('E: gone');
    const dry = JSON.parse((await cli('dlq', 'replay', '--reason', 'http_4xx', '--dry-run', '--json')).out);
    expect(dry).toMatchObject({ dryRun: true, replayed: [{ id: '2' }] });
    const replayed = await cli('dlq', 'replay', '2');
    expect(replayed).toMatchObject({ code: EXIT.ok, out: 'replayed 1 job(s): 2' });
    const again = await cli('dlq', 'replay', '2');
    expect(again.code).toBe(EXIT.refused);
    expect(again.out).toContain('job 2 is queued, not dead');
    expect((await cli('dlq', 'replay')).code).toBe(EXIT.usage); // no ids, no filter, no --all
    const { rows } = await admin.query(`select replayed_by from "${schema}".jobs where id = 2`);
    expect(rows[0].replayed_by).toBe('cli:tester');

    // By hand into the DLQ and out again.
    expect(await cli('dlq', 'move', '2', '--reason', 'bad_payload')).toMatchObject({
      code: EXIT.ok,
      out: 'moved job 2 to the DLQ',
    });
    const moved = await admin.query(`select state, dead_reason, last_error from "${schema}".jobs where id = 2`);
    expect(moved.rows[0]).toMatchObject({
      state: 'dead',
      dead_reason: 'bad_payload',
      last_error: { class: 'moved_to_dlq', message: 'moved to the DLQ by cli:tester' },
    });
    expect(await cli('dlq', 'move', '2')).toMatchObject({
      code: EXIT.refused,
      out: 'job 2 is dead: only queued or running jobs can be moved',
    });
    expect((await cli('dlq', 'move', '2', '--reason', 'Bad Reason')).code).toBe(EXIT.usage);
    expect((await cli('dlq', 'replay', '2')).code).toBe(EXIT.ok);

    expect(await cli('retry', '2')).toMatchObject({ code: EXIT.ok, out: 'job 2 will run now' });
    expect(await cli('cancel', '2')).toMatchObject({ code: EXIT.ok, out: 'cancelled job 2' });
    expect(await cli('cancel', '2')).toMatchObject({ code: EXIT.refused, out: 'job 2 is cancelled: not cancelled' });
    expect(await cli('retry', '2')).toMatchObject({
      code: EXIT.refused,
      out: 'job 2 is cancelled: only waiting jobs can be retried now',
    });
  });
});

describe('skiplock stats --watch', () => {
  it('queues pause / resume, kinds pause, pauses: held back for every claim, shown by stats, usage errors exit 2', async () => {
    const paused = await cli('queues', 'pause', 'payments', '--reason', 'card processor down');
    expect(paused).toMatchObject({ code: EXIT.ok });
    expect(paused.out).toMatch(/paused queue payments: no invocation claims its jobs/);
    expect((await cli('queues', 'pause', 'payments')).out).toMatch(/was already paused, since .* by cli:tester/);
    const claimable = async () =>
      (
        await claimJobs(conn().executor, schema, {
          leases: [{ kind: 'charge-card', leaseMs: 30_000 }],
          limit: 10,
          invocationId: 'cli-test',
        })
      ).jobs.length;
    expect(await claimable()).toBe(0);
    const human = await cli('stats');
    expect(human.out).toMatch(/payments\s+charge-card\s+1\s.*queue \d+s/);
    expect(human.out).toMatch(/queue\s+payments\s+.*cli:tester\s+card processor down/);
    const { paused: list } = JSON.parse((await cli('stats', '--json')).out);
    expect(list).toEqual([expect.objectContaining({ scope: 'queue', name: 'payments', pausedBy: 'cli:tester' })]);
    expect((await cli('kinds', 'pause', 'ping', '--by', 'alice')).code).toBe(EXIT.ok);
    const all = JSON.parse((await cli('pauses', '--json')).out) as { scope: string; name: string; pausedBy: string }[];
    expect(all.map((p) => [p.scope, p.name, p.pausedBy])).toEqual([
      ['queue', 'payments', 'cli:tester'],
      ['kind', 'ping', 'alice'],
    ]);
    expect((await cli('queues', 'resume', 'payments')).out).toMatch(/resumed queue payments \(paused since/);
    expect((await cli('queues', 'resume', 'payments')).out).toMatch(/queue payments was not paused/);
    expect((await cli('kinds', 'resume', 'ping')).code).toBe(EXIT.ok);
    expect((await cli('pauses')).out).toBe('nothing paused');
    expect(await claimable()).toBe(1);
    const noName = await cli('queues', 'pause');
    expect(noName).toMatchObject({ code: EXIT.usage });
    expect(noName.err).toMatch(/needs exactly one queue name/);
    const badName = await cli('queues', 'pause', 'no spaces');
    expect(badName).toMatchObject({ code: EXIT.usage });
    expect(badName.err).toMatch(/invalid queue name "no spaces"/);
    expect((await cli('queues', 'drop', 'payments')).code).toBe(EXIT.usage);
  });

  it('queues limit / unlimit, kinds limit, limits: set for every claim, listed with what runs, bad input exits 2', async () => {
    const set = await cli('queues', 'limit', 'payments', '3', '--reason', 'processor rate');
    expect(set).toMatchObject({ code: EXIT.ok });
    expect(set.out).toMatch(/at most 3 running for queue payments from the next claim on/);
    expect((await cli('queues', 'limit', 'payments', '2')).out).toMatch(/\(was 3\)/);
    expect((await cli('queues', 'limit', 'payments', '5', '--per-key')).out).toMatch(
      /at most 5 running for each concurrency key of queue payments/,
    );
    expect((await cli('kinds', 'limit', 'ping', '4', '--by', 'alice')).code).toBe(EXIT.ok);
    const listed = JSON.parse((await cli('limits', '--json')).out) as { runTime: { scope: string; name: string }[] };
    expect(listed.runTime.map((l) => [l.scope, l.name])).toEqual([
      ['key', 'payments'],
      ['kind', 'ping'],
      ['queue', 'payments'],
    ]);
    const table = (await cli('limits', ...JOBS)).out;
    expect(table).toMatch(/per key\s+payments\s+5/);
    expect(table).toMatch(/run time/);
    expect((await cli('queues', 'unlimit', 'payments')).out).toMatch(
      /cleared the run-time limit of queue payments \(was 2\)/,
    );
    expect((await cli('queues', 'unlimit', 'payments')).out).toMatch(/queue payments had no run-time limit/);
    expect((await cli('queues', 'limit', 'payments')).code).toBe(EXIT.usage);
    expect((await cli('queues', 'limit', 'payments', 'many')).code).toBe(EXIT.usage);
    expect((await cli('kinds', 'limit', 'ping', '2', '--per-key')).code).toBe(EXIT.usage);
    const zero = await cli('queues', 'limit', 'payments', '0');
    expect(zero.code).not.toBe(EXIT.ok);
    expect(zero.err).toMatch(/integer from 1 to 100000/);
    await cli('queues', 'unlimit', 'payments', '--per-key');
    await cli('kinds', 'unlimit', 'ping');
    expect((await cli('limits')).out).toMatch(/no run-time limits/);
  });

  it('breakers lists destinations with their breakers; breakers reset closes one (exit 1 for an unknown one)', async () => {
    expect((await cli('breakers')).out).toMatch(/no destinations recorded/);
    await admin.query(
      `insert into "${schema}".destinations (name, state, opened_at, open_until, trips, window_failures, window_calls, window_start)
       values ('down.example', 'open', now(), now() + interval '30 seconds', 2, 7, 9, now()),
              ('up.example', 'closed', null, null, 0, 0, 40, now())`,
    );
    const listed = (await cli('breakers')).out;
    expect(listed).toMatch(/down\.example\s+open\s+7\/9\s+\S+ \(\d+ ?s ago\)\s+\S+ \(\d+ ?s from now\)\s+2/);
    expect(listed).toMatch(/up\.example\s+closed\s+0\/40/);
    // stats shows the destinations held back (only those).
    const statsOut = (await cli('stats')).out;
    expect(statsOut).toMatch(/down\.example\s+open/);
    expect(statsOut).not.toMatch(/up\.example/);
    const reset = await cli('breakers', 'reset', 'down.example');
    expect(reset).toMatchObject({ code: EXIT.ok });
    expect(reset.out).toMatch(/closed the breaker of down\.example \(was open\)/);
    const row = await admin.query(`select state, changed_by from "${schema}".destinations where name = 'down.example'`);
    expect(row.rows).toEqual([{ state: 'closed', changed_by: 'cli:tester' }]);
    expect((await cli('breakers', 'reset', 'nobody.example')).code).toBe(EXIT.refused);
    expect((await cli('breakers', 'reset')).code).toBe(EXIT.usage);
  });

  it("rate-limits set, lists (with the code's rates and the scopes in use) and clears; bad rates exit 2", async () => {
    expect((await cli('rate-limits')).out).toMatch(/no run-time rate limits/);
    const set = await cli(
      'rate-limits',
      'set',
      'destination',
      'api.partner.example',
      '10/s',
      '--reason',
      'their quota',
    );
    expect(set).toMatchObject({ code: EXIT.ok });
    expect(set.out).toMatch(/at most 10\/s starts for destination api\.partner\.example from the next claim on/);
    expect((await cli('rate-limits', 'set', 'destination', 'api.partner.example', '600/min')).out).toMatch(
      /\(was 10\/s\)/,
    );
    expect((await cli('rate-limits', 'set', 'queue', 'payments', '5/2s', '--per-key')).out).toMatch(
      /at most 5 per 2000 ms starts for each concurrency key of queue payments/,
    );
    expect((await cli('rate-limits', 'set', 'destination', '*', '3/h')).out).toMatch(
      /each destination without a rate of its own/,
    );
    // A claim takes starts under the per-key rate: the listing shows the key in use.
    await admin.query(
      `insert into "${schema}".rate_buckets (scope, name, key, starts, counts, period_ms)
       values ('key', 'payments', 'tenant-1', array[now()], array[4], 2000)`,
    );
    // stats shows the rate-limited scopes in use.
    expect((await cli('stats')).out).toMatch(/starts within their period[\s\S]*per key\s+payments\s+tenant-1\s+4/);
    const listed = (await cli('rate-limits', ...JOBS)).out;
    expect(listed).toMatch(/destination\s+api\.partner\.example\s+600\/min\s+run time\s+cli:tester \d+s ago/);
    expect(listed).toMatch(/per key\s+payments\s+5 per 2000 ms\s+run time/);
    expect(listed).toMatch(/kind\s+ping\s+100\/min\s+code/);
    expect(listed).toMatch(/per key\s+payments\s+tenant-1\s+4\s+\S+ \(\d+s from now\)/);
    const json = JSON.parse((await cli('rate-limits', '--json')).out) as { runTime: { scope: string; name: string }[] };
    expect(json.runTime.map((r) => [r.scope, r.name])).toEqual([
      ['destination', '*'],
      ['destination', 'api.partner.example'],
      ['key', 'payments'],
    ]);
    expect((await cli('rate-limits', 'clear', 'queue', 'payments', '--per-key')).out).toMatch(
      /cleared the run-time rate of each concurrency key of queue payments \(was 5 per 2000 ms\)/,
    );
    expect((await cli('rate-limits', 'clear', 'queue', 'payments')).out).toMatch(/queue payments had no run-time rate/);
    const bad = await cli('rate-limits', 'set', 'queue', 'payments', 'fast');
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.err).toMatch(/the rate must look like 10\/s/);
    expect((await cli('rate-limits', 'set', 'kind', 'ping', '10/s', '--per-key')).code).toBe(EXIT.usage);
    expect((await cli('rate-limits', 'set', 'table', 'x', '10/s')).code).toBe(EXIT.usage);
    const zero = await cli('rate-limits', 'set', 'kind', 'ping', '0/s');
    expect(zero.code).not.toBe(EXIT.ok);
    expect(zero.err).toMatch(/limit must be a whole number from 1 to 100000/);
    const tooShort = await cli('rate-limits', 'set', 'kind', 'ping', '5/500ms');
    expect(tooShort.err).toMatch(/periodMs must be a whole number of milliseconds from 1000/);
  });

  it('schedules lists the recorded and the defined ones; schedules tick records and enqueues what is due', async () => {
    expect((await cli('schedules')).out).toMatch(/no schedules recorded \(pass --jobs/);
    const defined = (await cli('schedules', ...JOBS)).out;
    expect(defined).toMatch(
      /ping-hourly\s+0 \* \* \* \*\s+UTC\s+ping\s+not recorded yet\s+\S+ \([^)]+ from now\)\s+code/,
    );
    const first = await cli('schedules', 'tick', ...JOBS);
    expect(first).toMatchObject({ code: EXIT.ok, out: 'nothing was due' });
    // An hour and a half ago, as far as the schedule knows: the newest missed occurrence runs once.
    await admin.query(`update "${schema}".schedules set last_occurrence = now() - interval '90 minutes'`);
    const second = await cli('schedules', 'tick', ...JOBS);

    expect(second.out).toMatch(/^enqueued ping-hourly @ \S+:00:00\.000Z as job \d+$/m);
    const listed = JSON.parse((await cli('schedules', '--json')).out) as {
      name: string;
      lastJobId: string;
      source: string;
    }[];
    expect(listed).toEqual([expect.objectContaining({ name: 'ping-hourly', source: 'database' })]);
    expect(listed[0]?.lastJobId).toMatch(/^\d+$/);
    // Without --jobs: the run-time schedules only.
    expect(await cli('schedules', 'tick')).toMatchObject({
      code: EXIT.ok,
      out: expect.stringMatching(/^no run-time schedule was due/),
    });
  });

  it('stats --watch redraws until told to stop', async () => {
    const out: string[] = [];
    const code = await runCli(['stats', '--watch', '--iterations', '2', '--interval', '1'], {
      env: { DATABASE_URL: inject('databaseUrl'), SKIPLOCK_SCHEMA: schema },
      out: (t) => out.push(t),
      err: () => {},
    });
    expect(code).toBe(EXIT.ok);
    expect(out).toHaveLength(2);
    for (const frame of out) expect(frame).toMatch(/^\d{4}-\d{2}-\d{2}T.*\nqueue\s+kind/);
  });
});
