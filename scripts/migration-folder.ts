import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Migration, OBJECTS_MARKER } from '../db/migration-plan.js';

/** Reads a drizzle-kit migrations folder in journal order. */
export function readMigrationFolder(folder: string): Migration[] {
  const journal = JSON.parse(readFileSync(join(folder, 'meta', '_journal.json'), 'utf8')) as {
    entries: { tag: string }[];
  };
  return journal.entries.map(({ tag }) => {
    const text = readFileSync(join(folder, `${tag}.sql`), 'utf8');
    const statements = text
      .split('--> statement-breakpoint')
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
    const objectsFrom = statements.findIndex((s) => s.startsWith(OBJECTS_MARKER));
    return {
      tag,
      hash: createHash('sha256').update(text).digest('hex'),
      statements,
      objectsFrom: objectsFrom === -1 ? statements.length : objectsFrom,
    };
  });
}
