import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { hobbyCronProblems } from '../../cli/init.js';

const config = JSON.parse(readFileSync('vercel.json', 'utf8')) as {
  functions: Record<string, { maxDuration: number }>;
  crons: { path: string; schedule: string }[];
  rewrites: { source: string; destination: string }[];
};

describe('vercel.json', () => {
  it('every cron points at a route file that exports GET and refuses calls without CRON_SECRET', async () => {
    expect(config.crons.map((c) => c.path).sort()).toEqual(['/api/maintenance', '/api/reports-worker', '/api/worker']);
    const saved = process.env.CRON_SECRET;
    process.env.CRON_SECRET = 'cron-secret-for-this-test-0001';
    try {
      for (const cron of config.crons) {
        const file = `${cron.path.slice(1)}.ts`;
        expect(existsSync(file)).toBe(true);
        const route = (await import(`../../${file}`)) as { GET: (r: Request) => Promise<Response> };
        const anonymous = await route.GET(new Request(`https://app.example.com${cron.path}`));
        expect(anonymous.status).toBe(401);
        const wrong = await route.GET(
          new Request(`https://app.example.com${cron.path}`, { headers: { authorization: 'Bearer not-the-secret' } }),
        );
        expect(wrong.status).toBe(401);
      }
    } finally {
      process.env.CRON_SECRET = saved;
    }
  });

  it("each route's time budget equals its maxDuration", () => {
    for (const [file, { maxDuration }] of Object.entries(config.functions)) {
      const source = readFileSync(file, 'utf8');
      const budget = /maxDurationMs: ([\d_]+)/.exec(source)?.[1];
      if (budget) expect(Number(budget.replaceAll('_', ''))).toBe(maxDuration * 1000);
      else expect(source).not.toMatch(/createVercel(Worker|Maintenance)/);
    }
  });

  it('rewrites /admin and everything under it to the console route, which serves GET and POST', async () => {
    expect(config.rewrites).toEqual([
      { source: '/admin', destination: '/api/admin' },
      { source: '/admin/:path*', destination: '/api/admin' },
    ]);
    expect(config.functions['api/admin.ts']).toBeDefined();
    const route = (await import('../../api/admin.js')) as Record<string, unknown>;
    expect(typeof route.GET).toBe('function');
    expect(route.POST).toBe(route.GET);
  });
});

describe("Hobby's cron rules (hobbyCronProblems)", () => {
  const cron = (schedule: string) => ({ path: '/api/worker', schedule });
  it('a cron whose minute and hour are single numbers fires once a day: allowed', () => {
    for (const schedule of ['0 6 * * *', '30 23 * * 1-5', '5 0 1 * *']) {
      expect(hobbyCronProblems([cron(schedule)])).toEqual([]);
    }
  });
  it('every minute, every few minutes or hours, a list or a range of hours: refused', () => {
    for (const schedule of ['* * * * *', '*/10 * * * *', '0 */2 * * *', '0 6,18 * * *', '0 6-8 * * *', '0 6 * *']) {
      expect(hobbyCronProblems([cron(schedule)])).toHaveLength(1);
    }
  });
  it("more than 2 crons: refused; this repository's vercel.json is Pro's", () => {
    expect(hobbyCronProblems([cron('0 1 * * *'), cron('0 2 * * *'), cron('0 3 * * *')])).toEqual([
      '3 crons: Hobby allows 2',
    ]);
    expect(hobbyCronProblems(config.crons)).toContain('3 crons: Hobby allows 2');
  });
});
