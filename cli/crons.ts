import { readFileSync } from 'node:fs';
import { cronMatches, parseCron } from './cron.js';
import { type CliIo, EXIT } from './io.js';

/**
 * `skiplock crons`: what Vercel's cron scheduler does, for `next dev` on your machine. It reads the
 * crons of vercel.json and requests each path on its schedule (UTC), with `Authorization: Bearer
 * $CRON_SECRET` as Vercel sends it, so the worker and maintenance routes run locally without curl.
 * `--once` requests every cron once now and exits: 0 when each answered 2xx.
 */
export interface CronsOptions {
  url: string;
  file: string;
  once: boolean;
  /** Stops the loop (tests; Ctrl-C otherwise). */
  signal?: AbortSignal;
  /** When a minute starts; @defaultValue the system clock */
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

interface Cron {
  path: string;
  schedule: string;
  fields: Set<number>[];
}

const LOCAL = /^https?:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/;

export function readCrons(file: string): Cron[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new Error(`cannot read ${file}: run this in your app's folder, or pass --file path/to/vercel.json`);
  }
  let crons: unknown;
  try {
    crons = (JSON.parse(text) as { crons?: unknown }).crons;
  } catch (err) {
    throw new Error(`${file} is not valid JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(crons) || crons.length === 0) throw new Error(`${file} has no crons`);
  return crons.map((entry, i) => {
    const { path, schedule } = (entry ?? {}) as { path?: unknown; schedule?: unknown };
    if (typeof path !== 'string' || !path.startsWith('/') || typeof schedule !== 'string') {
      throw new Error(`${file}: crons[${i}] needs a path starting with / and a schedule`);
    }
    return { path, schedule, fields: parseCron(schedule) };
  });
}

async function request(cron: Cron, options: CronsOptions, secret: string, io: CliIo): Promise<boolean> {
  const started = Date.now();
  const at = new Date().toISOString().slice(11, 19);
  try {
    const response = await fetch(new URL(cron.path, options.url), { headers: { authorization: `Bearer ${secret}` } });
    const body = (await response.text()).replace(/\s+/g, ' ').slice(0, 200);
    io.out(`${at} ${cron.path} ${response.status} ${Date.now() - started} ms ${body}`);
    return response.ok;
  } catch (err) {
    io.out(`${at} ${cron.path} failed: ${(err as Error).message} (is the app running at ${options.url}?)`);
    return false;
  }
}

const pause = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });

export async function runCrons(options: CronsOptions, io: CliIo): Promise<number> {
  const secret = io.env.CRON_SECRET;
  if (!secret) {
    io.err('set CRON_SECRET to the value your app reads (e.g. from .env.local): the routes refuse requests without it');
    return EXIT.usage;
  }
  if (!LOCAL.test(options.url)) {
    io.err(`--url must be a local origin such as http://localhost:3000 (got ${JSON.stringify(options.url)})`);
    return EXIT.usage;
  }
  let crons: Cron[];
  try {
    crons = readCrons(options.file);
  } catch (err) {
    io.err((err as Error).message);
    return EXIT.usage;
  }
  if (options.once) {
    const answers = await Promise.all(crons.map((cron) => request(cron, options, secret, io)));
    return answers.every(Boolean) ? EXIT.ok : EXIT.refused;
  }
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? pause;
  io.out(`requesting ${crons.map((c) => `${c.path} (${c.schedule})`).join(', ')} at ${options.url}; Ctrl-C stops`);
  while (!options.signal?.aborted) {
    await sleep(60_000 - (now() % 60_000), options.signal);
    if (options.signal?.aborted) break;
    const minute = new Date(now());
    await Promise.all(
      crons.filter((c) => cronMatches(c.fields, minute)).map((cron) => request(cron, options, secret, io)),
    );
  }
  return EXIT.ok;
}
