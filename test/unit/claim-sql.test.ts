import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderClaimShapes } from '../../db/claim-shapes.js';

const folder = new URL('../../db/statements/sql/', import.meta.url);

// The claim is assembled from pieces; what the database receives is committed beside the code, one
// file per shape, so a review diffs the real statement.
describe('the rendered claim statements', () => {
  const shapes = renderClaimShapes();

  it.each(shapes.map((s) => [s.name, s] as const))(
    'claim-%s.sql is the statement the code sends (npm run db:dump)',
    (name, shape) => {
      const committed = readFileSync(new URL(`claim-${name}.sql`, folder), 'utf8');
      expect(shape.sql, `db/statements/sql/claim-${name}.sql is stale: run \`npm run db:dump\``).toBe(committed);
    },
  );

  it('has no file for a shape that no longer exists', () => {
    const files = readdirSync(folder).filter((f) => f.startsWith('claim-'));
    expect(files.sort()).toEqual(shapes.map((s) => `claim-${s.name}.sql`).sort());
  });

  it('sends the lease-index walk in every shape, never a bare scan of the lease index', () => {
    for (const shape of shapes) {
      expect(shape.sql, shape.name).toContain('lapsed_leases(');
      expect(shape.sql, shape.name).not.toMatch(/j\.lease_expires_at <= \(select now from clock\)/);
    }
  });
});
