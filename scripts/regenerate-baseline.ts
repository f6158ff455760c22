/**
 * `npm run db:baseline` (until 0.1.0 is published): regenerates the tables part of
 * db/migrations/0000_baseline.sql from db/schema.ts with drizzle-kit, keeps its hand-written objects
 * part (after `-- skiplock:objects`), replaces the drizzle snapshot, then embeds the migration and
 * rewrites db/schema.sql. After the release, schema changes go into a new migration instead
 * (docs/developing.md, "Writing a migration").
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OBJECTS_MARKER } from '../db/migration-plan.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const baseline = join(root, 'db/migrations/0000_baseline.sql');
const out = mkdtempSync(join(tmpdir(), 'skiplock-baseline-'));
const config = join(root, `.drizzle-baseline-${process.pid}.config.ts`);
try {
  writeFileSync(
    config,
    `export default ${JSON.stringify({ dialect: 'postgresql', schema: './db/schema.ts', out, schemaFilter: ['skiplock'] })};\n`,
  );
  execFileSync(join(root, 'node_modules/.bin/drizzle-kit'), ['generate', '--name', 'baseline', '--config', config], {
    cwd: root,
    stdio: 'inherit',
  });
  const tables = readFileSync(join(out, '0000_baseline.sql'), 'utf8').trimEnd();
  const current = readFileSync(baseline, 'utf8');
  const objects = current.slice(current.indexOf(OBJECTS_MARKER));
  writeFileSync(baseline, `${tables}\n--> statement-breakpoint\n${objects}`);
  copyFileSync(join(out, 'meta/0000_snapshot.json'), join(root, 'db/migrations/meta/0000_snapshot.json'));
} finally {
  rmSync(config, { force: true });
  rmSync(out, { recursive: true, force: true });
}
execFileSync('npm', ['run', 'db:dump'], { cwd: root, stdio: 'inherit' });
