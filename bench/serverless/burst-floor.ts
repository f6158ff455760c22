import { randomUUID } from 'node:crypto';
import { setTimeout as wait } from 'node:timers/promises';
import pg from 'pg';
import * as z from 'zod';
import { defineJob } from '../../core/jobs.js';
import { RAW_SCHEMA_CLAIM, RAW_SCHEMA_COMPLETE } from '../systems/raw-schema.js';
import { type BurstParams, seedBurst } from './burst.js';
import { round } from './figures.js';

export interface BurstFloor {
  seconds: number;
  idealSeconds: number;
  /** Statements the loops sent, per job. */
  statementsPerJob: number;
}

/**
 * 2. The burst's floor: the same jobs on skiplock's table, drained with the least machinery this
 * machine allows. Every loop (one per invocation the burst may run) starts at once — no tick,
 * fan-out, registration or sweep — on one connection of its own, and keeps `concurrency` jobs on a
 * real timer of `jobMs`: with nothing running, or half its slots free, it completes the jobs that
 * ended (RAW_SCHEMA_COMPLETE) and claims as many as are free (RAW_SCHEMA_CLAIM), as skiplock refills.
 * Its drain over the ideal is what the harness and the machine cost without a library; skiplock's
 * drain over it is the library's share (its start, its statements, its Node work).
 */
export async function measureBurstFloor(url: string, params: BurstParams): Promise<BurstFloor> {
  const job = defineJob({ kind: 'burst', payload: z.object({ n: z.number() }), handler: async () => {} });
  await seedBurst(url, job, params.jobs);
  const clients = await Promise.all(
    Array.from({ length: params.maxInvocations }, async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      return client;
    }),
  );
  try {
    const t0 = performance.now();
    const statements = await Promise.all(clients.map((client) => drainLoop(client, params)));
    const seconds = (performance.now() - t0) / 1000;
    return {
      seconds: round(seconds, 2),
      idealSeconds: round((params.jobs * params.jobMs) / 1000 / (params.concurrency * params.maxInvocations), 2),
      statementsPerJob: round(statements.reduce((a, b) => a + b, 0) / params.jobs, 2),
    };
  } finally {
    await Promise.all(clients.map((client) => client.end()));
  }
}

/** One loop of the floor until the queue is empty and its jobs are done; returns its statement count. */
async function drainLoop(client: pg.Client, { concurrency, jobMs }: BurstParams): Promise<number> {
  const token = randomUUID();
  let running = 0;
  let ended: string[] = [];
  let dry = false;
  let statements = 0;
  let wake: (() => void) | undefined;
  const complete = async () => {
    if (ended.length === 0) return;
    const ids = ended;
    ended = [];
    statements++;
    await client.query(RAW_SCHEMA_COMPLETE, [ids, token]);
  };
  while (true) {
    const free = concurrency - running;
    if (!dry && free > 0 && (running === 0 || free >= Math.ceil(concurrency / 2))) {
      await complete();
      statements++;
      const { rows } = await client.query(RAW_SCHEMA_CLAIM, [free, token]);
      if (rows.length === 0) dry = true;
      for (const row of rows as { id: string }[]) {
        running++;
        void wait(jobMs).then(() => {
          running--;
          ended.push(row.id);
          wake?.();
        });
      }
      continue;
    }
    if (dry && running === 0) break;
    // Conditions were checked just now, synchronously: an attempt that ends from here on wakes us.
    await new Promise<void>((resolve) => {
      wake = resolve;
    });
  }
  await complete();
  return statements;
}
