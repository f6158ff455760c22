/** A plain text table: a header row, a rule, aligned columns. */
export function table(rows: readonly Record<string, unknown>[], columns: readonly string[]): string {
  if (rows.length === 0) return '(none)';
  const cells = rows.map((row) => columns.map((c) => text(row[c])));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => (r[i] as string).length)));
  const line = (values: readonly string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd();
  return [line(columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

export function text(value: unknown): string {
  if (value === null || value === undefined) return '';
  // A job parked until others end (dependencies, ordering keys) runs at infinity: no date to show.
  if (value instanceof Date)
    return Number.isNaN(value.getTime()) ? 'waiting' : value.toISOString().replace('.000Z', 'Z');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** 3725 → "1h 2m" */
export function age(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return '';
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

/** A moment and how far it is from now: `… (3m 2s ago)`, `… (40s from now)`. */
export const when = (d: Date | null) =>
  d
    ? `${d.toISOString()} (${age(Math.abs(Date.now() - d.getTime()) / 1000)}${d.getTime() > Date.now() ? ' from now' : ' ago'})`
    : '';
