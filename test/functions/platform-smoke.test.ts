import { describe, expect, it } from 'vitest';
import { formatLine, smokePlatforms } from '../../scripts/smoke-platforms.js';

// `npm run smoke:platforms` as CI runs it: every runtime it needs is a devDependency (bun, deno,
// miniflare's workerd), so each platform must be there and pass. Bun and Node run the driver smoke
// set (scripts/platforms/core-smoke.ts) on node-postgres; workerd and Deno run an app whose enqueue
// route nudges its worker route, on neon-http.
describe('npm run smoke:platforms', () => {
  it('runs a job through Node, Bun, workerd and Deno, each ok', { timeout: 180_000 }, async () => {
    const lines = await smokePlatforms();
    console.log(lines.map(formatLine).join('\n'));
    expect(lines.map((l) => l.platform)).toEqual(['node', 'bun', 'cloudflare', 'deno']);
    for (const line of lines) {
      expect(line, `${line.platform}: ${line.failure}`).toMatchObject({ ok: true });
      expect(line.ms).toBeGreaterThan(0);
    }
  });
});
