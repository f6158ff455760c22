import { randomBytes } from 'node:crypto';
import { type Chrome, layout, type Page } from './html.js';

/** A console request, made from a Web Request by the web core (consoleRoute) on every platform. */
export interface ConsoleRequest {
  method: string;
  url: URL;
  header(name: string): string | undefined;
  cookie(name: string): string | undefined;
  /**
   * The hosts the browser may have sent this request to, which a form's Origin must name: the Host
   * header (the URL's host without one: `next start` reports every URL as localhost), and
   * X-Forwarded-Host where a proxy of yours sets it.
   */
  hosts: readonly string[];
  /** The client's address as the platform saw it (for the login throttle); 'unknown' without. */
  client: string;
  /** Reads the body; throws HttpError 413 past `maxBytes`. */
  readBody(maxBytes: number): Promise<string>;
}

export interface ConsoleResponse {
  status: number;
  headers: Record<string, string>;
  /** Set-Cookie values, one each. */
  cookies: string[];
  body: string;
}

/** Every page: no script at all, its one stylesheet by nonce, no framing, nothing cached. */
function securityHeaders(nonce: string): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': `default-src 'none'; style-src 'nonce-${nonce}'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'same-origin',
    'cache-control': 'no-store',
    'cross-origin-opener-policy': 'same-origin',
  };
}

export const newNonce = () => randomBytes(16).toString('base64');

export function page(
  status: number,
  content: Page,
  chrome: Omit<Chrome, 'nonce'>,
  cookies: string[] = [],
): ConsoleResponse {
  const nonce = newNonce();
  return { status, headers: securityHeaders(nonce), cookies, body: layout(content, { ...chrome, nonce }) };
}

export function redirect(location: string, cookies: string[] = []): ConsoleResponse {
  return { status: 303, headers: { ...securityHeaders(newNonce()), location }, cookies, body: '' };
}

/** The session cookie: the `__Host-` prefix pins it to this host and path /, over HTTPS (or localhost). */
export const SESSION_COOKIE = '__Host-skiplock-console';

export function sessionCookie(secret: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${secret}; Path=/; Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}; HttpOnly; Secure; SameSite=Strict`;
}

export const clearedSessionCookie = () => `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict`;

/** `a=1; b=2` → the value of `name`. */
export function cookieFrom(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}
