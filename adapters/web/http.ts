import { Buffer } from 'node:buffer';
import { createHash, timingSafeEqual } from 'node:crypto';
import { DatabaseError, SkiplockError } from '../../base/errors.js';

/**
 * The web core's HTTP edges, written once against Web `Request` / `Response`: bearer checks, body
 * limits and strict decoding, errors → status. Every platform reaches them through its converter.
 */

/** A JSON answer before it becomes a Response (or a Lambda invoke's `{ status, ...body }`). */
export interface HttpResponse {
  status: number;
  body: Record<string, unknown>;
}

/** The JSON Response of an answer. */
export function jsonResponse(response: HttpResponse): Response {
  return Response.json(response.body, { status: response.status });
}

const header = (request: Request, name: string) => request.headers.get(name) ?? undefined;
const methodOf = (request: Request) => request.method.toUpperCase();

/** An error with the HTTP status it maps to and a message safe to return. */
export class HttpError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Shorter bearer secrets are refused: they disable the endpoint that uses them. */
export const MIN_SECRET_LENGTH = 16;

const reportedWeakSecrets = new Set<string>();

/**
 * Bearer check in constant time: both sides are hashed to the same length first, so a
 * token of another length neither throws nor returns early. An unset secret refuses all, and so
 * does one shorter than MIN_SECRET_LENGTH (logged once per container, the value never echoed):
 * a bad secret disables only the endpoint that uses it.
 */
export function requireBearer(request: Request, secret: string | undefined, secretName: string): void {
  if (!secret) {
    throw new HttpError(401, 'unauthorized', `this endpoint is disabled until ${secretName} is set`);
  }
  if (secret.length < MIN_SECRET_LENGTH) {
    const message = `this endpoint is disabled: ${secretName} must be at least ${MIN_SECRET_LENGTH} characters`;
    if (!reportedWeakSecrets.has(secretName)) {
      reportedWeakSecrets.add(secretName);
      process.stdout.write(`${JSON.stringify({ level: 'error', msg: 'function_misconfigured', error: message })}\n`);
    }
    throw new HttpError(401, 'unauthorized', message);
  }
  const match = /^Bearer (.+)$/.exec(header(request, 'authorization') ?? '');
  const presented = createHash('sha256')
    .update(match?.[1] ?? '')
    .digest();
  const expected = createHash('sha256').update(secret).digest();
  const equal = timingSafeEqual(presented, expected);
  if (!match || !equal) throw new HttpError(401, 'unauthorized', 'missing or wrong bearer token');
}

/** Checks method and content type, reads the body under the limit, parses JSON. */
export async function readJson(request: Request, maxBytes: number): Promise<unknown> {
  if (methodOf(request) !== 'POST') throw new HttpError(405, 'method_not_allowed', 'use POST');
  const contentType = header(request, 'content-type') ?? '';
  if (!/^application\/json\s*(;|$)/i.test(contentType)) {
    throw new HttpError(400, 'unsupported_content_type', 'content-type must be application/json');
  }
  const declared = Number(header(request, 'content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(maxBytes);
  const text = await readBody(request, maxBytes);
  if (text.trim() === '') throw new HttpError(400, 'empty_body', 'the request body is empty; send a JSON object');
  return parseStorableJson(text);
}

/**
 * JSON that can be stored exactly as sent: a key `__proto__` would be dropped on the way (an
 * object's prototype, not its key, once a schema copies it), so it is refused, as a body that is
 * not UTF-8 is where it is read (readBody).
 */
function parseStorableJson(text: string): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new HttpError(400, 'malformed_json', 'the request body is not valid JSON');
  }
  if (hasProtoKey(parsed, 0)) {
    throw new HttpError(400, 'invalid_key', 'a key named __proto__ cannot be stored as sent; rename it');
  }
  return parsed;
}

function hasProtoKey(value: unknown, depth: number): boolean {
  if (value === null || typeof value !== 'object' || depth > 64) return false;
  if (Array.isArray(value)) return value.some((item) => hasProtoKey(item, depth + 1));
  if (Object.hasOwn(value, '__proto__')) return true;
  return Object.values(value).some((item) => hasProtoKey(item, depth + 1));
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Bytes as UTF-8 text, refused (400 invalid_utf8) rather than stored with replacement characters. */
export function decodeUtf8(bytes: Uint8Array): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw new HttpError(400, 'invalid_utf8', 'the request body is not valid UTF-8');
  }
}

/** As readJson, but an empty body is allowed: it reads as null (a signal without a payload). */
export async function readOptionalJson(request: Request, maxBytes: number): Promise<unknown> {
  if (methodOf(request) !== 'POST') throw new HttpError(405, 'method_not_allowed', 'use POST');
  const declared = Number(header(request, 'content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(maxBytes);
  const text = await readBody(request, maxBytes);
  if (text.trim() === '') return null;
  if (!/^application\/json\s*(;|$)/i.test(header(request, 'content-type') ?? '')) {
    throw new HttpError(400, 'unsupported_content_type', 'content-type must be application/json');
  }
  return parseStorableJson(text);
}

/**
 * A Request's body as UTF-8 text, refused (HttpError 413) as soon as it passes `maxBytes`, and
 * (400 invalid_utf8) when it is not UTF-8: the one body reader of every route and the console.
 */
export async function readBody(request: Request, maxBytes: number): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  // Leaving the loop early (a throw) cancels the stream: nothing more is read.
  for await (const chunk of request.body ?? []) {
    size += chunk.byteLength;
    if (size > maxBytes) throw tooLarge(maxBytes);
    chunks.push(chunk);
  }
  return decodeUtf8(Buffer.concat(chunks));
}

export function tooLarge(maxBytes: number): HttpError {
  return new HttpError(413, 'body_too_large', `the request body is over the ${maxBytes}-byte limit`);
}

const STATUS_BY_CODE: Record<string, number> = {
  invalid_payload: 400,
  invalid_options: 400,
  invalid_identifier: 400,
  unknown_kind: 400,
  payload_too_large: 413,
  invalid_signal_token: 401,
  signal_token_expired: 410,
  signal_token_used: 409,
  not_migrated: 503,
  schema_outdated: 503,
  database_error: 503,
  database_unreachable: 503,
  outcome_unknown: 503,
  config_error: 500,
};

/** Database failures are answered in words of their own (the driver's may name hosts). */
const PUBLIC_MESSAGES: Record<string, string> = {
  database_error: 'the database is unavailable; try again',
  database_unreachable: 'the database is unavailable; nothing was done; try again',
  outcome_unknown:
    'the connection to the database failed after the request was sent: it may have been carried out. Sending it again is safe for jobs with a dedupe key (the first job is returned); without one it may enqueue a second job',
};

/**
 * Any error → a response that never carries a stack, a connection string or a password:
 * our errors keep their message, anything else becomes "internal error".
 */
export function errorResponse(err: unknown): HttpResponse {
  if (err instanceof HttpError)
    return { status: err.status, body: { error: { code: err.code, message: err.message } } };
  if (err instanceof DatabaseError && err.sqlState?.startsWith('22')) {
    // A data exception (a value out of range, an invalid character): the input is at fault.
    return {
      status: 400,
      body: { error: { code: 'invalid_data', message: 'the request holds a value the database cannot store' } },
    };
  }
  if (err instanceof SkiplockError) {
    const status = STATUS_BY_CODE[err.code] ?? 500;
    const message = PUBLIC_MESSAGES[err.code] ?? err.message;
    return { status, body: { error: { code: err.code, message } } };
  }
  return { status: 500, body: { error: { code: 'internal', message: 'internal error' } } };
}
