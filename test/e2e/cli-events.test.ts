import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EXIT } from '../../cli/run.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { connect } from '../../db/connect.js';
import { cliOn } from '../helpers/cli.js';
import { signedUp } from '../helpers/cli-events.js';

// `skiplock sync` writes the module's subscriptions (what a deploy step runs); `skiplock events`
// lists, shows and replays events, against a real database.
const schema = `cli_events_${randomBytes(4).toString('hex')}`;
const JOBS = ['--jobs', 'test/helpers/cli-events.ts'];
let admin: pg.Pool;
let db: ReturnType<typeof connect>;
const cli = cliOn(schema);

beforeAll(async () => {
  admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
  db = connect({ connectionString: inject('databaseUrl') });
});
afterAll(async () => {
  await db?.close();
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await admin.end();
});

describe('skiplock sync and skiplock events', () => {
  it('sync writes the subscriptions once; events lists, flags, shows and replays', async () => {
    expect((await cli('migrate')).code).toBe(EXIT.ok);
    const q = createEnqueuer({ schema });
    // Published before any subscriber was registered: kept, flagged.
    const early = await q.publish(db, signedUp, { userId: 'u1', plan: 'pro' });
    expect(early.subscribers).toBe(0);
    const flagged = await cli('events', '--unsubscribed');
    expect(flagged.code).toBe(EXIT.ok);
    expect(flagged.out).toMatch(/user\.signed-up .*0 \(no subscriber\)/);
    expect((await cli('stats')).out).toContain('event user.signed-up: 1 published in the last hour with no subscriber');

    const synced = await cli('sync', ...JOBS);
    expect(synced.out).toContain('written: crm-sync, send-welcome');
    expect((await cli('sync', ...JOBS)).out).toContain('written: none (unchanged)');
    expect((await cli('sync')).code).toBe(EXIT.usage);

    const later = await q.publish(db, signedUp, { userId: 'u2', plan: 'free' });
    const shown = await cli('events', 'show', later.eventId as string);
    expect(shown.out).toContain('subscribers when published: 2');
    expect(shown.out).toMatch(/send-welcome: job \d+ queued/);
    expect(shown.out).not.toContain('crm-sync:');

    const from = new Date(Date.now() - 3_600_000).toISOString();
    const replay = await cli('events', 'replay', 'crm-sync', '--from', from, '--json');
    expect(JSON.parse(replay.out).map((d: { eventId: string }) => d.eventId)).toEqual([early.eventId]);
    expect((await cli('events', 'replay', 'crm-sync', '--from', from)).out).toContain('no event in that range');
    expect((await cli('events', 'replay', 'crm-sync')).code).toBe(EXIT.usage);
    const { rows } = await admin.query(`select id::text from "${schema}".jobs where kind = 'crm-sync'`);
    const why = await cli('jobs', 'why', rows[0].id);
    expect(why.out).toContain(`from event ${early.eventId} (user.signed-up`);
    expect(why.out).toContain('through subscription crm-sync');
    expect((await cli('events', 'subscriptions')).out).toMatch(/user\.signed-up\s+crm-sync\s+\{"plan":"pro"\}/);
  });
});
