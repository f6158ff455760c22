import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TABLES } from '../helpers/db.js';

// The tests empty every table before each test (test/helpers/db.ts), with the list read from
// db/schema.ts: a table added to the schema is emptied without anyone remembering to.
describe('the per-test truncation', () => {
  it('covers every table of the dumped schema', () => {
    const dumped = [...readFileSync('db/schema.sql', 'utf8').matchAll(/^CREATE TABLE skiplock\.(\w+)/gm)].map(
      (m) => m[1] as string,
    );
    expect(dumped.length).toBeGreaterThan(10);
    expect([...TABLES]).toEqual(dumped.sort());
  });
});
