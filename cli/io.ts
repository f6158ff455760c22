/** What a command writes to, and what its exit code means. */
export interface CliIo {
  env: Record<string, string | undefined>;
  out(text: string): void;
  err(text: string): void;
  /** True when stderr is a terminal (progress bars redraw in place). */
  tty?: boolean;
  /** Asks the person at the terminal to pick one of `choices`; absent when stdin is not a terminal. */
  ask?(question: string, choices: readonly string[]): Promise<string>;
}

/** Exit codes that mean something to scripts. */
export const EXIT = { ok: 0, refused: 1, usage: 2, database: 3, config: 4 } as const;

/** A command line that cannot be run as written: exit code 2, with a pointer to --help. */
export class UsageError extends Error {}
