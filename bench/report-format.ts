/** Formatting shared by the bench's reports (bench/report.ts, bench/report-issue25.ts). */

export type BySystem = Record<string, number>;
export const DELETE_MODE = 'skiplock (delete)';
export const fmt = (n: number | undefined) => (n === undefined ? '–' : n.toLocaleString('en-US'));
export const ratio = (a: number | undefined, b: number | undefined) => (a && b ? `${(a / b).toFixed(2)}×` : '–');

/** A system's jobs/s in the processing phase at `k` ('k1', 'k4', 'k16'); delete mode under skiplock_delete. */
export function figure(r: Record<string, unknown>, k: string, system: string): number | undefined {
  if (system === DELETE_MODE) return (r.skiplock_delete as BySystem | undefined)?.[`process_${k}`];
  return (r[`process_${k}`] as BySystem | undefined)?.[system];
}
