import { inject } from 'vitest';
import { runCli } from '../../cli/run.js';

/** What one CLI run exited with and printed (each stream's lines joined). */
export interface CliRun {
  code: number;
  out: string;
  err: string;
}

/**
 * The CLI on the run's database and `schema`, as `skiplock …` runs it (USER=tester): `cli('stats', '--json')`.
 * `env` adds to (or, with undefined, removes from) that environment.
 */
export function cliOn(
  schema: string,
  env: Record<string, string | undefined> = {},
): (...argv: string[]) => Promise<CliRun> {
  return async (...argv) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(argv, {
      env: { DATABASE_URL: inject('databaseUrl'), SKIPLOCK_SCHEMA: schema, USER: 'tester', ...env },
      out: (t) => out.push(t),
      err: (t) => err.push(t),
    });
    return { code, out: out.join('\n'), err: err.join('\n') };
  };
}
