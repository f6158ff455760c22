import { expect, it } from 'vitest';
import { eventsSection } from '../../bench/events.js';

it("the events_publish section shows each system's events/s, their ratio and statements per publish", () => {
  const md = eventsSection({
    events_publish: {
      subscribers: 5,
      events: 5_000,
      per_second: { skiplock: 900, 'pg-boss': 300 },
      statements_per_publish: { skiplock: 1, 'pg-boss': 6 },
    },
  });
  expect(md).toContain('## Events: publish to 5 subscribers');
  expect(md).toContain('| events/s | 900 | 300 | 3.00 |');
  expect(md).toContain('| statements per publish | 1 | 6 | |');
  expect(eventsSection({})).toBe('');
});

it('no module `npm run bench` bundles runs itself: in the bundle every module shares the entry point’s import.meta.url', async () => {
  const { readFileSync } = await import('node:fs');
  const seen = new Set<string>();
  const walk = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^import [^;]*? from '(\.\.?\/[^']+)\.js';$/gms)) {
      const target = new URL(`${m[1]}.ts`, `file://${file}`).pathname;
      if (target.includes('/bench/')) walk(target);
    }
  };
  const entry = new URL('../../bench/run.ts', import.meta.url).pathname;
  walk(entry);
  const selfRunning = [...seen].filter(
    (f) => f !== entry && /import\.meta\.url === .*process\.argv\[1\]/.test(readFileSync(f, 'utf8')),
  );
  expect(seen.size).toBeGreaterThan(5);
  expect(selfRunning).toEqual([]);
});
