/** What a masked value is shown as. */
export const MASK = '***';

/**
 * A copy of `payload` with the values at `paths` (dot paths, `*` matches any key or array
 * index) replaced by ***. Used wherever a payload is shown: CLI listings, job details.
 */
export function maskPayload(payload: unknown, paths: readonly string[]): unknown {
  if (paths.length === 0) return payload;
  const copy = structuredClone(payload);
  for (const path of paths) maskPath(copy, path.split('.'));
  return copy;
}

function maskPath(node: unknown, parts: string[]): void {
  if (typeof node !== 'object' || node === null || parts.length === 0) return;
  const [head, ...rest] = parts as [string, ...string[]];
  const record = node as Record<string, unknown>;
  const keys = head === '*' ? Object.keys(record) : [head];
  for (const key of keys) {
    if (!(key in record)) continue;
    if (rest.length === 0) record[key] = MASK;
    else maskPath(record[key], rest);
  }
}
