/** The nearest-rank percentile `q` (0–1) of `values`; 0 for none. */
export function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

export const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Progress lines: stdout, or stderr when stdout carries the JSON. */
export function progressLog(asJson: boolean): (line: string) => void {
  return (line) => {
    if (asJson) process.stderr.write(`${line}\n`);
    else console.log(line);
  };
}
