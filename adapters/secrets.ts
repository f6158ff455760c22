import { ConfigError } from '../base/errors.js';
import { type Clock, systemClock } from '../core/clock.js';
import { importOptionalPeer } from './optional-peer.js';

/** Reads a secret's string; the default uses the AWS SDK's Secrets Manager client. */
export type SecretFetcher = (secretId: string) => Promise<string>;

/** Where the database URL comes from, cached across warm invocations. */
export interface DatabaseUrlSource {
  /** The URL, from the cache while it is younger than the TTL. */
  get(): Promise<string>;
  /** Fetches anew (after an authentication failure: the password may have rotated). */
  refresh(): Promise<string>;
  /** True when the URL comes from a secret, so a refresh can change it. */
  readonly rotatable: boolean;
}

export function staticDatabaseUrl(url: string): DatabaseUrlSource {
  return { get: async () => url, refresh: async () => url, rotatable: false };
}

/**
 * The database URL from an AWS Secrets Manager secret: either the URL itself, or JSON with
 * `url` (or `connectionString`), or RDS-style `host`, `username`/`user`, `password`,
 * `dbname`/`database` and optional `port`. Cached for `ttlMs`.
 */
export function secretDatabaseUrl(
  secretId: string,
  options: { ttlMs: number; fetchSecret?: SecretFetcher; clock?: Clock },
): DatabaseUrlSource {
  const fetchSecret = options.fetchSecret ?? fetchFromSecretsManager;
  const clock = options.clock ?? systemClock;
  let cached: { url: string; at: number } | undefined;
  let inflight: Promise<string> | undefined;
  const load = () => {
    inflight ??= fetchSecret(secretId)
      .then((text) => {
        const url = databaseUrlFromSecret(secretId, text);
        cached = { url, at: clock.now() };
        return url;
      })
      .finally(() => {
        inflight = undefined;
      });
    return inflight;
  };
  return {
    rotatable: true,
    get: async () => {
      if (cached && clock.now() - cached.at < options.ttlMs) return cached.url;
      try {
        return await load();
      } catch (err) {
        // Secrets Manager unreachable or throttled: an expired value still beats no database.
        if (cached) return cached.url;
        throw err;
      }
    },
    refresh: () => load(),
  };
}

/** Turns a secret's text into a postgres URL, naming what is wrong without echoing it. */
export function databaseUrlFromSecret(secretId: string, text: string): string {
  const trimmed = text.trim();
  if (!trimmed.startsWith('{')) {
    if (/^postgres(ql)?:\/\//.test(trimmed)) return trimmed;
    throw new ConfigError(`secret ${secretId} is neither a postgres:// URL nor JSON`);
  }
  let value: Record<string, unknown>;
  try {
    value = JSON.parse(trimmed) as Record<string, unknown>;
  } catch {
    throw new ConfigError(`secret ${secretId} looks like JSON but does not parse`);
  }
  const url = value.url ?? value.connectionString ?? value.DATABASE_URL;
  if (typeof url === 'string') return databaseUrlFromSecret(secretId, url);
  const user = value.username ?? value.user;
  const database = value.dbname ?? value.database;
  const missing = [
    ['host', value.host],
    ['username', user],
    ['password', value.password],
    ['dbname', database],
  ]
    .filter(([, v]) => typeof v !== 'string' || v === '')
    .map(([name]) => name);
  if (missing.length > 0) {
    throw new ConfigError(`secret ${secretId} has no url and lacks ${missing.join(', ')}`);
  }
  const port = value.port === undefined ? '' : `:${Number(value.port)}`;
  return `postgres://${encodeURIComponent(String(user))}:${encodeURIComponent(String(value.password))}@${String(value.host)}${port}/${encodeURIComponent(String(database))}`;
}

/**
 * The AWS SDK's Secrets Manager client, loaded only when a secret is read: it is an optional peer
 * dependency (the Lambda Node.js runtime ships it), so an app that never sets DATABASE_SECRET_ID
 * never needs it, and the package root never loads it.
 */
function loadSecretsManager(): Promise<typeof import('@aws-sdk/client-secrets-manager')> {
  return importOptionalPeer(
    () => import(/* webpackIgnore: true */ /* turbopackIgnore: true */ '@aws-sdk/client-secrets-manager'),
    () => new MissingSecretsManagerError(),
  );
}

/** DATABASE_SECRET_ID is set but the AWS SDK's Secrets Manager client cannot be loaded. */
export class MissingSecretsManagerError extends ConfigError {
  constructor() {
    super(
      'DATABASE_SECRET_ID is set, but @aws-sdk/client-secrets-manager is not installed: add it to your app ' +
        '(npm install @aws-sdk/client-secrets-manager; the Lambda Node.js runtime already ships it), or set DATABASE_URL instead',
    );
  }
}

async function fetchFromSecretsManager(secretId: string): Promise<string> {
  const { SecretsManagerClient, GetSecretValueCommand } = await loadSecretsManager();
  sharedClient ??= new SecretsManagerClient({});
  const client = sharedClient;
  try {
    const result = await client.send(new GetSecretValueCommand({ SecretId: secretId }));
    if (typeof result.SecretString !== 'string') {
      throw new ConfigError(`secret ${secretId} has no SecretString (binary secrets are not supported)`);
    }
    return result.SecretString;
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const name = (err as { name?: string }).name ?? 'Error';
    if (name === 'ResourceNotFoundException') throw new ConfigError(`secret ${secretId} was not found`);
    if (name === 'AccessDeniedException') throw new ConfigError(`not allowed to read secret ${secretId}`);
    throw new ConfigError(`could not read secret ${secretId} (${name})`);
  }
}

let sharedClient: import('@aws-sdk/client-secrets-manager').SecretsManagerClient | undefined;
