// What `skiplock migrate` prints while it works, and what `migrate --check` found.

import type { MigrationEvent } from '../db/migrate.js';
import { describeDriftDetail, hasDrift, type SchemaDrift } from '../db/schema-drift.js';

export function describeMigrationEvent(event: MigrationEvent): string {
  switch (event.type) {
    case 'step':
      return `${event.tag}: step ${event.step} of ${event.of} (${event.kind === 'alone' ? 'concurrent index build' : 'transaction'})`;
    case 'lock_timeout':
      return `${event.tag}: step ${event.step} waited too long for a lock (another transaction holds the table); try ${event.attempt + 1} in ${event.retryInMs} ms`;
    case 'invalid_index_dropped':
      return `${event.tag}: index ${event.index} was left INVALID by an interrupted build: dropped, building it again`;
  }
}

export function describeDrift(schema: string, drift: SchemaDrift): string {
  const tuned = drift.tuned.length
    ? `\nstorage settings tuned by hand (not drift): ${drift.tuned.map((key) => key.replace(/^storage /, '')).join(', ')}`
    : '';
  if (!hasDrift(drift)) return `"${schema}" matches this version's schema${tuned}`;
  const lines = [`"${schema}" differs from this version's schema (db/schema.sql):`];
  for (const detail of drift.details) lines.push(`  ${describeDriftDetail(detail)}`);
  for (const index of drift.invalidIndexes)
    lines.push(`  INVALID index: ${index} (rebuild it: REINDEX INDEX CONCURRENTLY "${schema}"."${index}")`);
  for (const constraint of drift.unvalidatedConstraints) lines.push(`  constraint not validated: ${constraint}`);
  lines.push('run `npx skiplock migrate` with this version; an unexpected object may belong to a newer one');
  return lines.join('\n') + tuned;
}
