import { describe, expect, it } from 'vitest';
import { lintMigration, planSteps } from '../../db/migration-plan.js';
import { MIGRATIONS } from '../../db/migrations.generated.js';

const lint = (...statements: string[]) => lintMigration({ tag: '0001_test', statements }).map((f) => f.rule);

describe('the migration linter', () => {
  it('finds no blocking form in any migration skiplock ships', () => {
    for (const migration of MIGRATIONS) expect(lintMigration(migration), migration.tag).toEqual([]);
  });

  it.each([
    ['CREATE INDEX "jobs_x_idx" ON "skiplock"."jobs" USING btree ("kind");', 'index-concurrently'],
    ['CREATE UNIQUE INDEX "jobs_x_uq" ON "skiplock"."jobs" ("kind");', 'index-concurrently'],
    ['CREATE INDEX CONCURRENTLY "jobs_x_idx" ON "skiplock"."jobs" ("kind");', 'index-if-not-exists'],
    ['DROP INDEX "skiplock"."jobs_x_idx";', 'drop-index-concurrently'],
    ['ALTER TABLE "skiplock"."jobs" ADD CONSTRAINT "c" CHECK (priority > 0);', 'constraint-not-valid'],
    [
      'ALTER TABLE "skiplock"."jobs" ADD CONSTRAINT "f" FOREIGN KEY (x) REFERENCES "skiplock"."t"(id);',
      'constraint-not-valid',
    ],
    ['ALTER TABLE "skiplock"."jobs" ALTER COLUMN "priority" TYPE integer;', 'no-rewrite'],
    ['ALTER TABLE "skiplock"."jobs" ALTER COLUMN "priority" SET DATA TYPE integer;', 'no-rewrite'],
    ['ALTER TABLE "skiplock"."jobs" ALTER COLUMN "queue" SET NOT NULL;', 'no-set-not-null'],
    ['ALTER TABLE "skiplock"."jobs" ADD COLUMN "seen_at" timestamptz DEFAULT now();', 'no-volatile-default'],
    ['VACUUM FULL "skiplock"."jobs";', 'no-rewrite'],
    ['REINDEX TABLE "skiplock"."jobs";', 'no-rewrite'],
    ['ALTER TABLE "skiplock"."jobs" DROP COLUMN "progress";', 'expand-only'],
    ['ALTER TABLE "skiplock"."jobs" RENAME COLUMN "progress" TO "checkpoint";', 'expand-only'],
    ['DROP VIEW "skiplock"."queue_stats";', 'expand-only'],
    ['DROP FUNCTION "skiplock".claim_room(text[]);', 'expand-only'],
  ])('flags %s', (statement, rule) => {
    expect(lint(statement)).toEqual([rule]);
  });

  it.each([
    ['CREATE INDEX CONCURRENTLY IF NOT EXISTS "jobs_x_idx" ON "skiplock"."jobs" ("kind");'],
    ['DROP INDEX CONCURRENTLY IF EXISTS "skiplock"."jobs_x_idx";'],
    ['ALTER TABLE "skiplock"."jobs" ADD CONSTRAINT "c" CHECK (priority > 0) NOT VALID;'],
    ['ALTER TABLE "skiplock"."jobs" VALIDATE CONSTRAINT "c";'],
    ['ALTER TABLE "skiplock"."jobs" ADD COLUMN "tenant" text DEFAULT \'none\' NOT NULL;'],
    ['REINDEX INDEX CONCURRENTLY "skiplock"."jobs_x_idx";'],
    ['-- skiplock:contract (0.2.0 stopped reading it)\nALTER TABLE "skiplock"."jobs" DROP COLUMN "progress";'],
    // A comment that names a blocking form is not one.
    ['-- not CREATE INDEX "x" ON "skiplock"."jobs"\nALTER TABLE "skiplock"."jobs" ADD COLUMN "y" text;'],
  ])('passes %s', (statement) => {
    expect(lint(statement)).toEqual([]);
  });

  it('lets a migration do anything to a table it creates itself', () => {
    expect(
      lint(
        'CREATE TABLE "skiplock"."steps" ("job_id" bigint NOT NULL, "name" text NOT NULL);',
        'CREATE INDEX "steps_job_idx" ON "skiplock"."steps" ("job_id");',
        'ALTER TABLE "skiplock"."steps" ADD CONSTRAINT "steps_name_check" CHECK (name <> \'\');',
      ),
    ).toEqual([]);
  });

  it('allows a view or function to be dropped and created again in the same migration', () => {
    expect(lint('DROP VIEW "skiplock"."queue_stats";', 'CREATE VIEW "skiplock"."queue_stats" AS SELECT 1;')).toEqual(
      [],
    );
  });
});

describe('the steps of a migration', () => {
  it('groups ordinary DDL in one transaction; a concurrent build runs alone; a validation gets its own transaction', () => {
    const steps = planSteps([
      'ALTER TABLE "skiplock"."jobs" ADD COLUMN "tenant" text;',
      'ALTER TABLE "skiplock"."jobs" ADD CONSTRAINT "c" CHECK (tenant <> \'\') NOT VALID;',
      'ALTER TABLE "skiplock"."jobs" VALIDATE CONSTRAINT "c";',
      'CREATE INDEX CONCURRENTLY IF NOT EXISTS "jobs_tenant_idx" ON "skiplock"."jobs" ("tenant");',
      'CREATE VIEW "skiplock"."v" AS SELECT 1;',
    ]);
    expect(steps.map((s) => (s.kind === 'alone' ? `alone ${s.index}` : `transaction ${s.statements.length}`))).toEqual([
      'transaction 2',
      'transaction 1',
      'alone jobs_tenant_idx',
      'transaction 1',
    ]);
  });

  it('applies the baseline in one transaction', () => {
    expect(planSteps(MIGRATIONS[0]?.statements ?? []).map((s) => s.kind)).toEqual(['transaction']);
  });
});
