const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Text PostgreSQL can store: no NUL characters (text and jsonb refuse them) and no lone UTF-16
 * surrogates (not valid UTF-8). Both become U+FFFD.
 */
export function storableText(text: string): string {
  return text.replaceAll('\u0000', '\uFFFD').replace(LONE_SURROGATE, '\uFFFD');
}

/** What in `json` (a JSON text) PostgreSQL's jsonb would refuse, or null. */
export function unstorableInJson(json: string): string | null {
  if (json.includes('\\u0000')) return 'a NUL character (\\u0000), which PostgreSQL cannot store';
  if (/\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}/i.test(json)) {
    return 'an unpaired UTF-16 surrogate, which is not valid Unicode';
  }
  return null;
}
