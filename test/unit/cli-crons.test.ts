// `skiplock crons`: Vercel's cron requests for `next dev`, against a real local HTTP server.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCrons } from '../../cli/crons.js';
import { EXIT } from '../../cli/io.js';
import { runCli } from '../../cli/run.js';

const SECRET = 'cron-secret-for-the-crons-test';
const seen: { path: string; authorization: string | undefined }[] = [];
let server: Server;
let url: string;
const dir = mkdtempSync(join(tmpdir(), 'skiplock-crons-'));
const vercelJson = join(dir, 'vercel.json');
writeFileSync(
  vercelJson,
  JSON.stringify({
    crons: [
      { path: '/api/worker', schedule: '* * * * *' },
      { path: '/api/maintenance', schedule: '*/10 * * * *' },
    ],
  }),
);

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push({ path: req.url ?? '', authorization: req.headers.authorization });
    res.writeHead(req.url === '/api/broken' ? 500 : 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ completed: 0 }));
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((done) => server.close(done)));

const io = (env: Record<string, string | undefined> = { CRON_SECRET: SECRET }) => {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { env, out: (t: string) => void out.push(t), err: (t: string) => void err.push(t) }, out, err };
};

describe('skiplock crons', () => {
  it('--once requests every cron with the bearer secret and exits 0 when each answered 2xx', async () => {
    seen.length = 0;
    const { io: cli, out } = io();
    expect(await runCli(['crons', '--once', '--url', url, '--file', vercelJson], cli)).toBe(EXIT.ok);
    expect(seen.map((s) => s.path).sort()).toEqual(['/api/maintenance', '/api/worker']);
    expect(seen.every((s) => s.authorization === `Bearer ${SECRET}`)).toBe(true);
    expect(out.join('\n')).toMatch(/\/api\/worker 200 \d+ ms \{"completed":0\}/);
  });

  it('runs each cron in the minutes its schedule matches (UTC)', async () => {
    seen.length = 0;
    // Minutes 09:58, 09:59, 10:00 and 10:01: the worker every minute, maintenance at 10:00 only.
    let now = Date.UTC(2026, 10, 29, 9, 57, 30);
    const controller = new AbortController();
    let minutes = 0;
    const { io: cli } = io();
    const code = await runCrons(
      {
        url,
        file: vercelJson,
        once: false,
        signal: controller.signal,
        now: () => now,
        sleep: async (ms) => {
          now += ms;
          if (++minutes > 4) controller.abort();
        },
      },
      cli,
    );
    expect(code).toBe(EXIT.ok);
    expect(seen.filter((s) => s.path === '/api/worker')).toHaveLength(4);
    expect(seen.filter((s) => s.path === '/api/maintenance')).toHaveLength(1);
  });

  it('refuses without CRON_SECRET, a remote URL, or an unreadable vercel.json, naming what to fix', async () => {
    const missing = io({});
    expect(await runCli(['crons', '--once', '--url', url, '--file', vercelJson], missing.io)).toBe(EXIT.usage);
    expect(missing.err.join('')).toMatch(/set CRON_SECRET/);
    const remote = io();
    expect(
      await runCli(['crons', '--once', '--url', 'https://my-app.example.com', '--file', vercelJson], remote.io),
    ).toBe(EXIT.usage);
    expect(remote.err.join('')).toMatch(/local origin/);
    const absent = io();
    expect(await runCli(['crons', '--once', '--url', url, '--file', join(dir, 'nope.json')], absent.io)).toBe(
      EXIT.usage,
    );
    expect(absent.err.join('')).toMatch(/cannot read .*nope\.json/);
    const badCron = join(dir, 'bad.json');
    writeFileSync(badCron, JSON.stringify({ crons: [{ path: '/api/worker', schedule: '* * *' }] }));
    const bad = io();
    expect(await runCli(['crons', '--once', '--url', url, '--file', badCron], bad.io)).toBe(EXIT.usage);
    expect(bad.err.join('')).toMatch(/needs 5 fields/);
  });

  it('exits 1 when a route answers an error', async () => {
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, JSON.stringify({ crons: [{ path: '/api/broken', schedule: '* * * * *' }] }));
    const { io: cli, out } = io();
    expect(await runCli(['crons', '--once', '--url', url, '--file', broken], cli)).toBe(EXIT.refused);
    expect(out.join('\n')).toMatch(/\/api\/broken 500/);
  });
});
