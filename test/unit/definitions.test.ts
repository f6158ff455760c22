import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, InvalidIdentifierError } from '../../base/errors.js';
import { scrubSecrets } from '../../base/scrub-secrets.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob, JobRegistry } from '../../core/jobs.js';
import { connect } from '../../db/connect.js';

describe('job definitions', () => {
  it('applies documented defaults', () => {
    const job = defineJob({ kind: 'k', payload: z.object({}) });
    expect(job).toMatchObject({
      kind: 'k',
      queue: 'default',
      priority: 0,
      maxAttempts: 25,
      timeoutMs: 30_000,
      transactional: false,
    });
  });

  it('rejects bad names and values with a clear message', () => {
    expect(() => defineJob({ kind: 'a"b', payload: z.object({}) })).toThrow(InvalidIdentifierError);
    expect(() => defineJob({ kind: 'k', queue: 'q;drop', payload: z.object({}) })).toThrow(
      /invalid queue name "q;drop"/,
    );
    expect(() => defineJob({ kind: 'k', maxAttempts: 0, payload: z.object({}) })).toThrow(ConfigError);
    expect(() => defineJob({ kind: 'k', timeoutMs: 0, payload: z.object({}) })).toThrow(ConfigError);
    expect(() => defineJob({ kind: 'k', priority: 1.5, payload: z.object({}) })).toThrow(ConfigError);
  });

  it('a registry refuses duplicate kinds and names the known ones for unknown lookups', () => {
    const a = defineJob({ kind: 'a', payload: z.object({}) });
    expect(() => new JobRegistry([a, a])).toThrow(/defined twice/);
    expect(() => new JobRegistry([a]).get('b')).toThrow(/unknown job kind "b"; known kinds: a/);
  });

  it('refuses schema names that would need quoting', () => {
    for (const schema of ['a"b', 'a%b', 'a$b', 'a;b', 'Upper', '']) {
      expect(() => createEnqueuer({ schema })).toThrow(InvalidIdentifierError);
    }
  });
});

describe('connection strings and secrets', () => {
  it('a malformed connection string is refused without echoing it', () => {
    for (const url of ['not a url s3cret', 'mysql://u:s3cret@h/db', 'postgres://u:s3cret@/db']) {
      let message = '';
      try {
        connect({ connectionString: url });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toMatch(/not a valid postgres/);
      expect(message).not.toContain('s3cret');
    }
  });

  it('scrubs passwords and connection strings from driver messages', () => {
    expect(scrubSecrets('connect to postgres://app:hunter2@db.example.com:5432/x failed')).toBe(
      'connect to postgres://*** failed',
    );
    expect(scrubSecrets('password=hunter2 host=x')).toBe('password=*** host=x');
  });
});
