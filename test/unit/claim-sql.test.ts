import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderClaimShapes } from '../../scripts/claim-shapes.js';

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

  it("leaves the ordering keys' turn out of the plain claim (it is planned on every call)", () => {
    const byName = new Map(shapes.map((s) => [s.name, s.sql]));
    expect(byName.get('plain')).not.toContain('o.ordering_key = j.ordering_key');
    expect(byName.get('plain')).toContain('j.ordering_key is null');
    expect(byName.get('ordered')).toContain('o.ordering_key = j.ordering_key');
  });

  it('takes exactly `within` in the flow shapes, which holds the deferral to a richer shape: no probe turn without the job', () => {
    // claim_probes hands out a breaker's half-open turn from `within`, before the update. A condition
    // that holds the update back but not `within` gave the turn to a job the claim then left queued.
    const byName = new Map(shapes.map((s) => [s.name, s.sql]));
    for (const name of ['limited', 'rated']) {
      const text = byName.get(name) as string;
      const update = /\n\s*claimed as \(\s*[\s\S]*?\n\s*where ([\s\S]*?)\n\s*returning /.exec(text);
      expect(update, name).not.toBeNull();
      expect(update?.[1]?.replace(/\s+/g, ' '), name).toBe(
        'j.id = any(array(select c.id from within c where c.id not in (select p.id from probe_pick p) or c.id in (select w.job_id from probe_won w)))',
      );
      const probes = /probe_won as \(([\s\S]*?)\n\s*\),/.exec(text)?.[1] ?? '';
      expect(probes, name).toContain('claim_probes(');
      expect(probes.match(/p\.id in \(select id from within\)/g), name).toHaveLength(3);
    }
    const within = (name: string) =>
      /\n\s*within as \(([\s\S]*?)\n\s*limit \$\d+\n/.exec(byName.get(name) as string)?.[1];
    expect(within('limited')).toContain('and not (select f.rated from shape f)');
    expect(within('rated')).not.toContain('select f.rated from shape f');
  });

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

  it('defines every CTE once, before any piece reads it, and reads every CTE it defines', () => {
    for (const shape of shapes) {
      const code = shape.sql
        .split('\n')
        .filter((line) => !line.trimStart().startsWith('--'))
        .join('\n');
      const defined = [
        ...code.matchAll(
          /(?:with recursive |with |,\s*)([a-z_][a-z0-9_]*)(?:\s*\([a-z_, ]*\))? as (?:not materialized |materialized )?\(/g,
        ),
      ];
      const names = defined.map((m) => m[1] as string);
      expect(names.length, `${shape.name}: its CTEs were not found`).toBeGreaterThanOrEqual(5);
      expect(new Set(names).size, `${shape.name}: a CTE defined twice`).toBe(names.length);
      for (const match of defined) {
        const name = match[1] as string;
        const at = match.index ?? 0;
        const reads = [...code.matchAll(new RegExp(`\\b(?:from|join)\\s+${name}\\b`, 'g'))].map((m) => m.index ?? 0);
        expect(reads.length, `${shape.name}: ${name} is defined and never read`).toBeGreaterThan(0);
        expect(
          reads.filter((i) => i < at),
          `${shape.name}: ${name} is read before it is defined`,
        ).toEqual([]);
      }
    }
  });
});
