import { describe, expect, it } from 'vitest';
import {
  CONFIG_VARIABLES,
  EnvironmentSettings,
  FUNCTION_DEFAULTS,
  loadConfig,
  PURPOSES,
} from '../../adapters/config.js';
import { baseOfRoutes } from '../../adapters/web/routes.js';
import { routeUrl } from '../../adapters/web/start.js';
import { ENQUEUE_DEFAULTS } from '../../core/enqueue.js';
import { MAINTENANCE_DEFAULTS } from '../../core/maintenance.js';
import { WORKER_DEFAULTS } from '../../core/worker/index.js';
import { CONNECT_DEFAULTS } from '../../db/connection-options.js';

describe('configuration from the environment', () => {
  it("defaults are the library's own constants", () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://localhost/app' });
    expect(config).toMatchObject({
      driver: CONNECT_DEFAULTS.driver,
      poolMax: CONNECT_DEFAULTS.max,
      statementTimeoutMs: CONNECT_DEFAULTS.statementTimeoutMs,
      queryTimeoutMs: CONNECT_DEFAULTS.queryTimeoutMs,
      schema: ENQUEUE_DEFAULTS.schema,
      maxPayloadBytes: ENQUEUE_DEFAULTS.maxPayloadBytes,
      concurrency: WORKER_DEFAULTS.concurrency,
      safetyMarginMs: WORKER_DEFAULTS.safetyMarginMs,
      leaseGraceMs: WORKER_DEFAULTS.leaseGraceMs,
      completedJobs: WORKER_DEFAULTS.completedJobs,
      lingerMs: WORKER_DEFAULTS.lingerMs,
      completedRetentionHours: MAINTENANCE_DEFAULTS.completedRetentionMs / 3_600_000,
      deadRetentionHours: MAINTENANCE_DEFAULTS.deadRetentionMs / 3_600_000,
      maxDurationMs: FUNCTION_DEFAULTS.maxDurationMs,
      secretTtlMs: FUNCTION_DEFAULTS.secretTtlMs,
      maxBodyBytes: FUNCTION_DEFAULTS.maxBodyBytes,
      logLevel: FUNCTION_DEFAULTS.logLevel,
      metrics: FUNCTION_DEFAULTS.metrics,
      queues: undefined,
      serviceName: 'skiplock',
    });
  });

  it('each purpose reports only the problems of the variables it reads, by name, never by value', () => {
    const settings = new EnvironmentSettings({
      DATABASE_URL: 'postgres://u:s3cret@localhost/app',
      SKIPLOCK_CONCURRENCY: '0',
      SKIPLOCK_MAX_BODY_BYTES: 'huge-s3cret',
      SKIPLOCK_DEAD_RETENTION_HOURS: '-1',
    });
    expect(settings.problems('database')).toEqual([]);
    expect(settings.problems('worker')).toEqual(['SKIPLOCK_CONCURRENCY must be at least 1']);
    expect(settings.problems('enqueue')).toEqual([
      'SKIPLOCK_MAX_BODY_BYTES must be a whole number from 1024 to 6291456',
    ]);
    expect(settings.problems('replay')).toEqual(settings.problems('enqueue'));
    expect(settings.problems('maintenance')).toEqual(['SKIPLOCK_DEAD_RETENTION_HOURS must be at least 0']);
    expect(() => settings.require('database', 'worker')).toThrow(
      'invalid configuration: SKIPLOCK_CONCURRENCY must be at least 1',
    );
    expect(settings.require('database').databaseUrl).toBe('postgres://u:s3cret@localhost/app');
    expect(() => settings.require()).toThrow(
      /SKIPLOCK_CONCURRENCY.*SKIPLOCK_MAX_BODY_BYTES.*SKIPLOCK_DEAD_RETENTION_HOURS/,
    );
    expect(settings.problems().join(' ')).not.toContain('s3cret');
  });

  it('SKIPLOCK_LINGER_MS reaches the worker; a bad value disables only the worker', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://localhost/app', SKIPLOCK_LINGER_MS: '2000' }).lingerMs).toBe(2_000);
    const settings = new EnvironmentSettings({ DATABASE_URL: 'postgres://localhost/app', SKIPLOCK_LINGER_MS: 'soon' });
    expect(settings.problems('worker')).toEqual(['SKIPLOCK_LINGER_MS must be a whole number from 0 to 900000']);
    expect(settings.problems('enqueue')).toEqual([]);
    expect(settings.problems('maintenance')).toEqual([]);
  });

  it('every variable belongs to a purpose, and every purpose names only known variables', () => {
    const used = new Set<string>(Object.values(PURPOSES).flat());
    // AWS_LAMBDA_FUNCTION_NAME is set by Lambda itself: only a fallback for SKIPLOCK_SERVICE_NAME.
    expect(CONFIG_VARIABLES.filter((name) => !used.has(name))).toEqual(['AWS_LAMBDA_FUNCTION_NAME']);
    for (const name of used) expect(CONFIG_VARIABLES).toContain(name);
  });

  it('SKIPLOCK_NUDGE_FUNCTIONS names the worker function of each queue; a malformed value disables only enqueue', () => {
    const settings = new EnvironmentSettings({
      DATABASE_URL: 'postgres://localhost/app',
      SKIPLOCK_NUDGE_FUNCTIONS: 'emails,webhooks=app-prod-worker;reports=app-prod-reportsWorker;*=app-prod-worker',
    });
    expect(settings.require('enqueue').nudgeFunctions).toEqual({
      emails: 'app-prod-worker',
      webhooks: 'app-prod-worker',
      reports: 'app-prod-reportsWorker',
      '*': 'app-prod-worker',
    });
    for (const bad of ['emails', 'emails=', '=fn', 'a=b=c', 'bad queue=fn']) {
      const broken = new EnvironmentSettings({
        DATABASE_URL: 'postgres://localhost/app',
        SKIPLOCK_NUDGE_FUNCTIONS: bad,
      });
      expect(broken.problems('enqueue')).toEqual([
        'SKIPLOCK_NUDGE_FUNCTIONS must read queue,queue=function;queue=function',
      ]);
      expect(broken.problems('worker')).toEqual([]);
    }
  });
  it('SKIPLOCK_NUDGE_ROUTES names the worker route of each queue; a malformed value disables only enqueue', () => {
    const settings = new EnvironmentSettings({
      DATABASE_URL: 'postgres://localhost/app',
      SKIPLOCK_NUDGE_ROUTES: 'emails,webhooks=/api/worker;reports=https://jobs.example.com/api/reports-worker',
    });
    expect(settings.require('enqueue').nudgeRoutes).toEqual({
      emails: '/api/worker',
      webhooks: '/api/worker',
      reports: 'https://jobs.example.com/api/reports-worker',
    });
    for (const bad of ['emails', 'emails=api/worker', 'emails=ftp://x/y', '=/api/worker', 'bad queue=/api/worker']) {
      const broken = new EnvironmentSettings({ DATABASE_URL: 'postgres://localhost/app', SKIPLOCK_NUDGE_ROUTES: bad });
      expect(broken.problems('enqueue')).toEqual([
        'SKIPLOCK_NUDGE_ROUTES must read queue,queue=/route/path;queue=https://host/path',
      ]);
      expect(broken.problems('worker')).toEqual([]);
    }
  });

  it('SKIPLOCK_BASE_URL keeps its origin and path; a bad one disables the worker and enqueue, not replay or maintenance', () => {
    const settings = new EnvironmentSettings({
      DATABASE_URL: 'postgres://localhost/app',
      SKIPLOCK_BASE_URL: 'https://user:s3cret@my-project.supabase.co/functions/v1/?x=1#y',
    });
    expect(settings.require('worker').baseUrl).toBe('https://my-project.supabase.co/functions/v1');
    // Vercel requests its routes at the origin alone, as before; a one-script platform below the path.
    const { baseUrl } = settings.require('worker');
    expect(routeUrl('/api/worker', baseOfRoutes(baseUrl, undefined, false) ?? '').href).toBe(
      'https://my-project.supabase.co/api/worker',
    );
    expect(routeUrl('/skiplock/skiplock/worker', baseOfRoutes(baseUrl, undefined, true) ?? '').href).toBe(
      'https://my-project.supabase.co/functions/v1/skiplock/skiplock/worker',
    );
    expect(routeUrl('https://elsewhere.example/w', baseUrl ?? '').href).toBe('https://elsewhere.example/w');
    expect(baseOfRoutes(undefined, new URL('https://served.example/skiplock/enqueue'), true)).toBe(
      'https://served.example',
    );
    expect(loadConfig({ DATABASE_URL: 'postgres://localhost/app' }).baseUrl).toBeUndefined();
    for (const bad of ['my-app.example.com', 'ftp://my-app.example.com', 'javascript:alert(1)']) {
      const broken = new EnvironmentSettings({ DATABASE_URL: 'postgres://localhost/app', SKIPLOCK_BASE_URL: bad });
      const problem = 'SKIPLOCK_BASE_URL must be an absolute http(s) URL such as https://my-app.example.com';
      expect(broken.problems('worker')).toEqual([problem]);
      expect(broken.problems('enqueue')).toEqual([problem]);
      expect(broken.problems('replay')).toEqual([]);
      expect(broken.problems('maintenance')).toEqual([]);
    }
  });
  it('the Lambda wake-up variables reach the worker, maintenance and enqueue; a bad one disables them, never echoed', () => {
    const role = 'arn:aws:iam::123456789012:role/service-role/skiplock-wake';
    const settings = new EnvironmentSettings({
      DATABASE_URL: 'postgres://localhost/app',
      SKIPLOCK_WAKE_ROLE_ARN: role,
      SKIPLOCK_WAKE_GROUP: 'skiplock-prod',
      SKIPLOCK_MAINTENANCE_FUNCTION: 'app-prod-maintenance',
    });
    expect(settings.require('worker')).toMatchObject({
      wakeRoleArn: role,
      wakeGroup: 'skiplock-prod',
      maintenanceFunction: 'app-prod-maintenance',
    });
    expect(settings.require('enqueue')).toMatchObject({ idle: true, wakeRoleArn: role });
    expect(loadConfig({ DATABASE_URL: 'postgres://localhost/app' })).toMatchObject({
      wakeRoleArn: undefined,
      wakeGroup: undefined,
      maintenanceFunction: undefined,
    });
    const broken = new EnvironmentSettings({
      DATABASE_URL: 'postgres://localhost/app',
      SKIPLOCK_WAKE_ROLE_ARN: 'arn:aws:iam::123456789012:user/s3cret-person',
      SKIPLOCK_WAKE_GROUP: 'no spaces',
    });
    const problems = [
      'SKIPLOCK_WAKE_ROLE_ARN must be an IAM role ARN (arn:aws:iam::123456789012:role/name)',
      'SKIPLOCK_WAKE_GROUP must be a schedule group name (letters, digits, _ . -)',
    ];
    for (const purpose of ['worker', 'maintenance', 'enqueue'] as const) {
      expect(broken.problems(purpose)).toEqual(problems);
    }
    expect(broken.problems('replay')).toEqual([]);
    expect(broken.problems('console')).toEqual([]);
    expect(JSON.stringify(broken.problems())).not.toContain('s3cret');
  });

  it("SKIPLOCK_NEON_WS_PROXY and SKIPLOCK_NEON_FETCH_ENDPOINT point Neon's drivers at a proxy and an endpoint", () => {
    const url = 'postgres://localhost/app';
    const standIns = {
      SKIPLOCK_NEON_WS_PROXY: '127.0.0.1:4444/v1',
      SKIPLOCK_NEON_FETCH_ENDPOINT: 'http://127.0.0.1:4445/sql',
    };
    expect(loadConfig({ DATABASE_URL: url, SKIPLOCK_DRIVER: 'neon-ws', ...standIns }).neon).toEqual({
      wsProxy: '127.0.0.1:4444/v1',
      useSecureWebSocket: false,
      pipelineTLS: false,
      pipelineConnect: false,
      coalesceWrites: false,
    });
    expect(
      loadConfig({
        DATABASE_URL: url,
        SKIPLOCK_DRIVER: 'neon-ws',
        SKIPLOCK_NEON_WS_PROXY: 'wss://proxy.example.com:443/v1',
      }).neon,
    ).toMatchObject({ wsProxy: 'proxy.example.com:443/v1', useSecureWebSocket: true });
    expect(loadConfig({ DATABASE_URL: url, SKIPLOCK_DRIVER: 'neon-http', ...standIns }).neon).toEqual({
      fetchEndpoint: 'http://127.0.0.1:4445/sql',
    });
    // Unset (Neon itself), or on pg: Neon's own settings.
    expect(loadConfig({ DATABASE_URL: url, SKIPLOCK_DRIVER: 'neon-ws' }).neon).toBeUndefined();
    expect(loadConfig({ DATABASE_URL: url, SKIPLOCK_DRIVER: 'neon-http' }).neon).toBeUndefined();
    expect(loadConfig({ DATABASE_URL: url, ...standIns }).neon).toBeUndefined();
  });

  it('a bad Neon stand-in variable disables only the driver that reads it, by name, never by value', () => {
    const bad = { SKIPLOCK_NEON_WS_PROXY: 'ws://s3cret', SKIPLOCK_NEON_FETCH_ENDPOINT: 'ftp://s3cret/sql' };
    const settings = (driver: string) =>
      new EnvironmentSettings({ DATABASE_URL: 'postgres://localhost/app', SKIPLOCK_DRIVER: driver, ...bad });
    expect(settings('pg').problems()).toEqual([]);
    const ws = settings('neon-ws').problems('database');
    expect(ws).toEqual([
      'SKIPLOCK_NEON_WS_PROXY must be host:port or host:port/path, optionally after ws:// or wss:// (such as 127.0.0.1:4444/v1)',
    ]);
    const http = settings('neon-http').problems('database');
    expect(http).toEqual([
      'SKIPLOCK_NEON_FETCH_ENDPOINT must be an absolute http(s) URL such as http://127.0.0.1:4445/sql',
    ]);
    expect([...ws, ...http].join(' ')).not.toContain('s3cret');
    for (const proxy of [
      '127.0.0.1',
      'host:port',
      '127.0.0.1:4444?address=x',
      'http://127.0.0.1:4444',
      '127.0.0.1:99999',
    ]) {
      const one = new EnvironmentSettings({
        DATABASE_URL: 'postgres://localhost/app',
        SKIPLOCK_DRIVER: 'neon-ws',
        SKIPLOCK_NEON_WS_PROXY: proxy,
      });
      expect(one.problems('database'), proxy).toEqual([ws[0]]);
    }
    // The CLI picks the driver itself (--driver): the same variables, checked for that driver.
    expect(() => settings('pg').connection('neon-http')).toThrow(
      'invalid configuration: SKIPLOCK_NEON_FETCH_ENDPOINT must be an absolute http(s) URL such as http://127.0.0.1:4445/sql',
    );
    expect(settings('neon-http').connection('pg')).toEqual({ driver: 'pg', neon: undefined });
  });
});
