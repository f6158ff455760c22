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

/** Keys whose values are secrets wherever they appear: masked whatever the kind declares. */
const SECRET_KEY =
  /pass(word|phrase|wd)|^pass$|pwd|secret|token|api[-_]?key|authorization|cookie|credential|private[-_]?key|^ssn$|card[-_]?number|^cvc$|^cvv$|^dsn$|connection[-_]?string|(database|db)[-_]?url/i;

/**
 * Text with the secrets it may carry masked: a URL's password (`postgres://user:***@host`),
 * `password=…`-style pairs, bearer tokens. For error messages and response bodies shown to people.
 */
export function maskSecretText(text: string): string {
  return text
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@'"]*):[^\s@'"]*@/gi, `$1:${MASK}@`)
    .replace(
      /\b(pass(?:word|wd)?|pwd|secret|token|api[-_]?key)(["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;&]+)/gi,
      `$1$2${MASK}`,
    )
    .replace(/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/g, `$1 ${MASK}`);
}

/**
 * A copy of `value` with the value of every key that names a secret (password, token, apiKey,
 * databaseUrl, …) masked, and the secrets in every other string (maskSecretText) too.
 */
export function maskSecretKeys(value: unknown): unknown {
  if (typeof value === 'string') return maskSecretText(value);
  if (Array.isArray(value)) return value.map(maskSecretKeys);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, v]) => [key, SECRET_KEY.test(key) ? MASK : maskSecretKeys(v)]),
  );
}
