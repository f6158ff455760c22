import * as z from 'zod';
import { ConfigError } from '../base/errors.js';
import { DRIVERS, type Driver } from '../db/drivers/names.js';

/** Settings of a deployed skiplock function, read from the environment. */
export interface SkiplockConfig {
  /** DATABASE_URL; absent when the URL comes from Secrets Manager. */
  databaseUrl: string | undefined;
  /** DATABASE_SECRET_ID: a Secrets Manager secret id or ARN holding the URL or its parts. */
  databaseSecretId: string | undefined;
  driver: Driver;
  schema: string;
  queues: string[] | undefined;
  kinds: string[] | undefined;
  concurrency: number;
  batchSize: number | undefined;
  safetyMarginMs: number;
  leaseGraceMs: number;
  completedJobs: 'keep' | 'delete';
  maxDurationMs: number;
  secretTtlMs: number;
  poolMax: number;
  statementTimeoutMs: number;
  queryTimeoutMs: number;
  maxBodyBytes: number;
  maxPayloadBytes: number;
  enqueueToken: string | undefined;
  adminToken: string | undefined;
  cronSecret: string | undefined;
  completedRetentionHours: number;
  deadRetentionHours: number;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** 'emf': CloudWatch Embedded Metric Format lines after each invocation and maintenance tick. */
  metrics: 'none' | 'emf';
  /** Name of this deployment in metrics (the Service dimension). */
  serviceName: string;
}

const int = (min: number, max: number) =>
  z.preprocess(
    (v) => (v === undefined || v === '' ? undefined : Number(v)),
    z
      .number({ error: `must be a whole number from ${min} to ${max}` })
      .int(`must be a whole number from ${min} to ${max}`)
      .min(min, `must be at least ${min}`)
      .max(max, `must be at most ${max}`),
  );
const list = z.preprocess(
  (v) =>
    typeof v === 'string' && v.trim() !== ''
      ? v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : undefined,
  z.array(z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, 'must be a comma-separated list of names')).optional(),
);
const secret = z.preprocess(
  (v) => (v === '' ? undefined : v),
  z.string().min(16, 'must be at least 16 characters').optional(),
);

/** Every variable with its default. Values are never echoed in errors: some are secrets. */
const envSchema = z.object({
  DATABASE_URL: z.preprocess((v) => (v === '' ? undefined : v), z.string().optional()),
  DATABASE_SECRET_ID: z.preprocess((v) => (v === '' ? undefined : v), z.string().max(2048).optional()),
  SKIPLOCK_DRIVER: z.enum(DRIVERS, { error: `must be one of ${DRIVERS.join(', ')}` }).default('pg'),
  SKIPLOCK_SCHEMA: z
    .string()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lower-case identifier')
    .default('skiplock'),
  SKIPLOCK_QUEUES: list,
  SKIPLOCK_KINDS: list,
  SKIPLOCK_CONCURRENCY: int(1, 1000).default(10),
  SKIPLOCK_BATCH_SIZE: int(1, 1000).optional(),
  SKIPLOCK_SAFETY_MARGIN_MS: int(0, 600_000).default(1_000),
  SKIPLOCK_LEASE_GRACE_MS: int(0, 3_600_000).default(5_000),
  SKIPLOCK_MAX_DURATION_MS: int(1_000, 900_000).default(60_000),
  SKIPLOCK_SECRET_TTL_MS: int(0, 86_400_000).default(300_000),
  SKIPLOCK_POOL_MAX: int(1, 100).default(5),
  SKIPLOCK_STATEMENT_TIMEOUT_MS: int(0, 3_600_000).default(10_000),
  SKIPLOCK_QUERY_TIMEOUT_MS: int(0, 3_600_000).default(15_000),
  SKIPLOCK_MAX_BODY_BYTES: int(1_024, 6_291_456).default(1_048_576),
  SKIPLOCK_MAX_PAYLOAD_BYTES: int(1, 6_291_456).default(262_144),
  SKIPLOCK_ENQUEUE_TOKEN: secret,
  SKIPLOCK_ADMIN_TOKEN: secret,
  CRON_SECRET: secret,
  SKIPLOCK_COMPLETED_JOBS: z.enum(['keep', 'delete']).default('keep'),
  SKIPLOCK_COMPLETED_RETENTION_HOURS: int(0, 87_600).default(24),
  SKIPLOCK_DEAD_RETENTION_HOURS: int(0, 87_600).default(720),
  SKIPLOCK_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  SKIPLOCK_METRICS: z.enum(['none', 'emf']).default('none'),
  SKIPLOCK_SERVICE_NAME: z.string().min(1).max(200).optional(),
  AWS_LAMBDA_FUNCTION_NAME: z.string().optional(),
});

export const CONFIG_VARIABLES = Object.keys(envSchema.shape);

/**
 * Reads and validates the configuration. Every problem is listed in one message, by
 * variable name; no value is ever repeated back.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): SkiplockConfig {
  const parsed = envSchema.safeParse(env);
  const problems = parsed.success
    ? []
    : parsed.error.issues.map((i) => `${String(i.path[0] ?? 'environment')} ${i.message}`);
  if (!env.DATABASE_URL && !env.DATABASE_SECRET_ID) {
    problems.push('DATABASE_URL or DATABASE_SECRET_ID must be set');
  }
  if (!parsed.success || problems.length > 0) {
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  }
  const e = parsed.data;
  return {
    databaseUrl: e.DATABASE_URL,
    databaseSecretId: e.DATABASE_URL ? undefined : e.DATABASE_SECRET_ID,
    driver: e.SKIPLOCK_DRIVER,
    schema: e.SKIPLOCK_SCHEMA,
    queues: e.SKIPLOCK_QUEUES,
    kinds: e.SKIPLOCK_KINDS,
    concurrency: e.SKIPLOCK_CONCURRENCY,
    batchSize: e.SKIPLOCK_BATCH_SIZE,
    safetyMarginMs: e.SKIPLOCK_SAFETY_MARGIN_MS,
    leaseGraceMs: e.SKIPLOCK_LEASE_GRACE_MS,
    completedJobs: e.SKIPLOCK_COMPLETED_JOBS,
    maxDurationMs: e.SKIPLOCK_MAX_DURATION_MS,
    secretTtlMs: e.SKIPLOCK_SECRET_TTL_MS,
    poolMax: e.SKIPLOCK_POOL_MAX,
    statementTimeoutMs: e.SKIPLOCK_STATEMENT_TIMEOUT_MS,
    queryTimeoutMs: e.SKIPLOCK_QUERY_TIMEOUT_MS,
    maxBodyBytes: e.SKIPLOCK_MAX_BODY_BYTES,
    maxPayloadBytes: e.SKIPLOCK_MAX_PAYLOAD_BYTES,
    enqueueToken: e.SKIPLOCK_ENQUEUE_TOKEN,
    adminToken: e.SKIPLOCK_ADMIN_TOKEN,
    cronSecret: e.CRON_SECRET,
    completedRetentionHours: e.SKIPLOCK_COMPLETED_RETENTION_HOURS,
    deadRetentionHours: e.SKIPLOCK_DEAD_RETENTION_HOURS,
    logLevel: e.SKIPLOCK_LOG_LEVEL,
    metrics: e.SKIPLOCK_METRICS,
    serviceName: e.SKIPLOCK_SERVICE_NAME ?? e.AWS_LAMBDA_FUNCTION_NAME ?? 'skiplock',
  };
}
