/**
 * Performance figures in the docs, and the committed bench JSON they come from (bench/results.ts).
 *
 * A figure is quoted as a link whose title names its source and key:
 * `[51,903 jobs/s](performance.md#the-last-full-run "bench: process_k4.skiplock")`. The title is
 * `<source>: <expression>`, the source one of bench/results.ts's (bench, soak, serverless, steps,
 * idle), the expression a key path (`a.b.c`; in a list, an index or the `label`/`transport` of an
 * element), a number, or two of them divided: `bench: process_k4.skiplock ÷ raw_floor_k4`. The
 * figure must read as the value rounded to the decimals it is written with (`1.22×`, `6.3 ms`,
 * `51,903`; a `%` is the value times 100), a date as the date.
 *
 * Anything else that reads as a performance figure is flagged: a rate (`… jobs/s`, events,
 * occurrences or steps a second), a ratio (`1.4×`), microseconds, and a duration (`6.3 ms`,
 * `5–10 s`) in a sentence that says it was measured (p50, p99, median, measured, drains in, took,
 * cold, costs, faster, slower, bench); in a table, the row with its header and the paragraph before
 * the table count as that sentence, and a row whose first cell is code (an option, a function)
 * states settings. Not read: code (blocks and inline), HTML
 * comments, the generated blocks `<!-- name: source -->` … `<!-- /name -->` (compared whole with
 * what their JSON renders), and the regions `<!-- figures: npm run <script> -->` … `<!-- /figures -->`
 * that hold the output of a tool other than the benches (a drill), which must name its script.
 */
import { paragraphsOf } from './markdown.js';

export type Records = Record<string, unknown>;

const SOURCE_NAMES = ['bench', 'soak', 'serverless', 'steps', 'idle'] as const;
/** A marked figure: the link's text, its target and the title naming the source and key. */
const MARKED = new RegExp(`\\[([^\\]]+)\\]\\(([^)\\s]*)\\s+"((?:${SOURCE_NAMES.join('|')}): [^"]+)"\\)`, 'g');
const NUMBER = /\d[\d,]*(?:\.\d+)?/g;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** Always a performance figure, wherever it stands. */
const ALWAYS: readonly RegExp[] = [
  /~?\d[\d,]*(?:\.\d+)?\s?(?:jobs|events|occurrences|steps)(?:\/s\b|\s(?:per|a) second\b)/g,
  /~?\d+(?:\.\d+)?×/g,
  /~?\d[\d,]*(?:\.\d+)?(?:\s?[–-]\s?\d[\d,]*(?:\.\d+)?)?\s?µs\b/g,
];
/** A duration, a figure when its sentence says it was measured. */
const DURATION = /~?\d[\d,]*(?:\.\d+)?(?:\s?[–-]\s?\d[\d,]*(?:\.\d+)?)?\s(?:ms|s)\b/g;
/** Words of a sentence that reports a measurement ("the rate it measured" is fan-out's own, not one). */
const MEASURED =
  /\bp(?:50|90|95|99)\b|\bmedian\b|(?<!\bit )\bmeasured\b|\bdrain(?:s|ed) in\b|\btook\b|\bcold\b|\bcosts?\b|\bfaster\b|\bslower\b|\bbench(?:mark)?\b/i;

/** The lines of generated blocks and tool-output regions, and HTML comments, blanked (line numbers kept). */
export function withoutGenerated(source: string): string {
  const lines = source.split('\n');
  let closing: string | undefined;
  return lines
    .map((line, index) => {
      if (closing) {
        if (line === closing) closing = undefined;
        return '';
      }
      const open = /^<!-- ([a-z][a-z0-9-]*): .+ -->$/.exec(line);
      // A marker without a closing comment (an example's) stands for itself alone.
      if (open && lines.indexOf(`<!-- /${open[1]} -->`, index + 1) > index) closing = `<!-- /${open[1]} -->`;
      return line.replace(/<!--.*?-->/g, '');
    })
    .join('\n');
}

/** The value a title names, or why it names none. */
export function resolve(records: Records, title: string): { value: number | string } | { error: string } {
  const colon = title.indexOf(': ');
  const source = title.slice(0, colon);
  const record = records[source];
  if (record === undefined) return { error: `no source "${source}"` };
  const terms = title
    .slice(colon + 2)
    .split(' ÷ ')
    .map((term) => term.trim());
  if (terms.length > 2) return { error: `"${title}": one division at most` };
  const values: (number | string)[] = [];
  for (const term of terms) {
    if (/^\d+(?:\.\d+)?$/.test(term)) {
      values.push(Number(term));
      continue;
    }
    let at: unknown = record;
    for (const key of term.split('.')) {
      if (Array.isArray(at)) {
        at = /^\d+$/.test(key)
          ? at[Number(key)]
          : at.find((item: Record<string, unknown>) => item?.label === key || item?.transport === key);
      } else if (at !== null && typeof at === 'object') {
        at = (at as Record<string, unknown>)[key];
      } else {
        at = undefined;
      }
      if (at === undefined) return { error: `${source} has no ${term}` };
    }
    if (typeof at !== 'number' && typeof at !== 'string') return { error: `${source}: ${term} is not a figure` };
    values.push(at);
  }
  const [a, b] = values as [number | string, number | string | undefined];
  if (b === undefined) return { value: a };
  if (typeof a !== 'number' || typeof b !== 'number' || b === 0) return { error: `"${title}": cannot divide` };
  return { value: a / b };
}

/** Whether a figure as written reads as `value`: the same date, or the value rounded to its decimals. */
export function agrees(text: string, value: number | string): boolean {
  const written = text.trim();
  if (typeof value === 'string') return DATE.test(value) ? written === value : false;
  const numbers = written.match(NUMBER) ?? [];
  if (numbers.length !== 1) return false;
  const digits = (numbers[0] as string).replace(/,/g, '');
  const decimals = digits.split('.')[1]?.length ?? 0;
  const scaled = written.endsWith('%') ? value * 100 : value;
  return scaled.toFixed(decimals) === digits;
}

/** A paragraph as the checks read it: no inline code, no URLs. */
const prose = (text: string) => text.replace(/`[^`]*`/g, '').replace(/https?:\/\/\S+/g, '');

/** What a marked figure is checked against, and what was flagged in a page: `line: problem`. */
export interface PageFigures {
  /** Marked figures found: `line: text (title)`. */
  marked: string[];
  problems: string[];
}

export function checkFigures(source: string, records: Records): PageFigures {
  const marked: string[] = [];
  const problems: string[] = [];
  let tableContext = '';
  let before = '';
  for (const { line, text } of paragraphsOf(withoutGenerated(source))) {
    const plain = prose(text);
    for (const [, figure, , title] of plain.matchAll(MARKED)) {
      marked.push(`${line}: ${figure} (${title})`);
      const found = resolve(records, title as string);
      if ('error' in found) problems.push(`${line}: [${figure}] — ${found.error}`);
      else if (!agrees(figure as string, found.value))
        problems.push(
          `${line}: [${figure}] disagrees with ${title}: ${typeof found.value === 'number' ? Number(found.value.toPrecision(6)) : found.value}`,
        );
    }
    const rest = plain.replace(MARKED, '');
    const row = rest.trimStart().startsWith('|');
    if (row && !tableContext) tableContext = `${before} ${rest}`;
    if (!row) tableContext = '';
    const unmarked = ALWAYS.flatMap((pattern) => [...rest.matchAll(pattern)].map((m) => m[0]));
    // A row of a reference table (its first cell is code: an option, a function) states settings.
    const reference = row && /^\s*\|\s*`/.test(text);
    const sentences = reference ? [] : row ? [`${tableContext} ${rest}`] : rest.split(/(?<=\.)\s+/);
    for (const sentence of sentences) {
      if (!MEASURED.test(sentence)) continue;
      const own = row ? rest : sentence;
      unmarked.push(...[...own.matchAll(DURATION)].map((m) => m[0]));
    }
    for (const figure of unmarked)
      problems.push(`${line}: "${figure}" is not linked to the bench JSON (a link titled "<source>: <key>")`);
    if (!row) before = rest;
  }
  return { marked, problems };
}

/** The tool-output regions of a page: the command each names, with its line. */
export function figureRegions(source: string): { line: number; command: string }[] {
  return source.split('\n').flatMap((l, i) => {
    const m = /^<!-- figures: (.+) -->$/.exec(l);
    return m ? [{ line: i + 1, command: m[1] as string }] : [];
  });
}
