// What `skiplock migrate` prints while it works and when it is done, and what `migrate --check` found.

import type { MigrateResult, MigrationEvent } from '../db/migrate.js';
import { describeDriftDetail, hasDrift, type SchemaCheck } from '../db/schema-drift.js';

export function describeMigrationEvent(event: MigrationEvent): string {
  switch (event.type) {
    case 'step':
      return `${event.tag}: step ${event.step} of ${event.of} (${event.kind === 'alone' ? 'concurrent index build' : 'transaction'})`;
    case 'lock_timeout':
      return `${event.tag}: step ${event.step} waited too long for a lock (another transaction holds the table); try ${event.attempt + 1} in ${event.retryInMs} ms`;
    case 'invalid_index_dropped':
      return `${event.tag ?? 'schema'}: index ${event.index} was left INVALID by an interrupted build: dropped, building it again concurrently`;
  }
}

export function describeMigrateResult(result: MigrateResult): string {
  const schema = `"${result.schema}"`;
  const done = result.recorded.length
    ? `${schema} already has this version's schema: recorded ${result.recorded.join(', ')} in its journal, applied nothing; \`skiplock migrate\` applies the next releases' migrations`
    : result.applied.length
      ? `applied ${result.applied.join(', ')} to ${schema}`
      : `${schema} is up to date`;
  const rebuilt = result.rebuiltIndexes.length
    ? `\nbuilt again ${result.rebuiltIndexes.join(', ')}, which an interrupted build had left INVALID`
    : '';
  return done + rebuilt;
}

export function describeDrift(schema: string, check: SchemaCheck): string {
  const tuned = check.tuned.length
    ? `\nstorage settings tuned by hand (not drift): ${check.tuned.map((key) => key.replace(/^storage /, '')).join(', ')}`
    : '';
  const unjournaled = check.unjournaled
    ? `\n"${schema}" has no journal of skiplock's migrations (made by drizzle-kit or by hand): \`npx skiplock migrate\` records it`
    : '';
  if (!hasDrift(check)) return `"${schema}" matches this version's schema${unjournaled}${tuned}`;
  const lines = [`"${schema}" differs from this version's schema:`];
  for (const detail of check.details) lines.push(`  ${describeDriftDetail(detail)}`);
  for (const index of check.invalidIndexes)
    lines.push(
      check.unexpected.includes(`index ${index}`)
        ? `  INVALID index: ${index} (not this version's: drop it with DROP INDEX CONCURRENTLY "${schema}"."${index}")`
        : `  INVALID index: ${index} (\`npx skiplock migrate\` drops it and builds it again, concurrently)`,
    );
  for (const constraint of check.unvalidatedConstraints) lines.push(`  constraint not validated: ${constraint}`);
  lines.push(advice(check));
  return lines.join('\n') + tuned;
}

/** What to do about the differences: where they came from decides what fixes them. */
function advice(check: SchemaCheck): string {
  if (check.unjournaled)
    return [
      "no journal of skiplock's migrations: this schema was made by drizzle-kit or by hand, and `skiplock migrate`",
      'records it only once it matches. On the Drizzle path, generate these changes with drizzle-kit (README: "the',
      'Drizzle path"); to hand it to `skiplock migrate`, run migrate with the skiplock version it was generated from first',
    ].join('\n');
  if (check.pending.length)
    return `run \`npx skiplock migrate\` with this version (it applies ${check.pending.join(', ')}); an unexpected object may belong to a newer one`;
  return 'the journal records every migration of this version: these differences were made by hand (an unexpected object may belong to a newer version). `skiplock migrate` does not put back what was changed or dropped by hand (it rebuilds only INVALID indexes): restore each definition shown above, which `npx skiplock migrate --print` also prints';
}
