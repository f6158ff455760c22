import type { Driver } from '../../db/connect.js';
import { listenToStatements } from '../../db/statement-listeners.js';

/** A statement an Executor sent: its SQL text, and the driver of its connection (undefined for an executor made of a caller's Drizzle database or client). */
export interface SentStatement {
  text: string;
  driver: Driver | undefined;
}

/**
 * Captures the SQL text of every statement skiplock sends while `fn` runs, as its Executors tell it
 * (db/statement-listeners.ts): through connections of `driver`, and through executors made of a
 * caller's Drizzle database or client. A hot statement counts once (its own transaction, or the JIT
 * setting in front of it on neon-http, travels with it in one round trip); a batch counts each of
 * its statements, a transaction its BEGIN and COMMIT. `onStatement` sees each text as it is sent.
 */
export async function captureStatements<T>(
  driver: Driver,
  fn: () => Promise<T>,
  onStatement: (text: string) => void = () => {},
): Promise<{ result: T; texts: string[]; sent: SentStatement[] }> {
  const sent: SentStatement[] = [];
  const stop = listenToStatements((text, from) => {
    if (from !== undefined && from !== driver) return;
    sent.push({ text, driver: from });
    onStatement(text);
  });
  try {
    return { result: await fn(), texts: sent.map((s) => s.text), sent };
  } finally {
    stop();
  }
}

/** How many statements a driver sends while `fn` runs. */
export async function countStatements<T>(
  driver: Driver,
  fn: () => Promise<T>,
): Promise<{ result: T; statements: number }> {
  const { result, texts } = await captureStatements(driver, fn);
  return { result, statements: texts.length };
}
