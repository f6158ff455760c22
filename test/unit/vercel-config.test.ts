import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

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
