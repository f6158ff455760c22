import { randomUUID } from 'node:crypto';
import { cpus } from 'node:os';
import { setTimeout as wait } from 'node:timers/promises';
import { neon } from '@neondatabase/serverless';
import pg from 'pg';
import * as z from 'zod';
import { defineJob } from '../../core/jobs.js';
import type { NeonOptions } from '../../db/connection-options.js';
import { applyNeonOptions } from '../../db/drivers/neon-config.js';
import { RAW_SCHEMA_CLAIM, RAW_SCHEMA_COMPLETE } from '../systems/raw-schema.js';
import { type BurstParams, machineCpu, processTicks, seedBurst, TICKS_PER_SECOND } from './burst.js';
import { round } from './figures.js';

export interface BurstFloor {
  /** How the loops reach the database: their own pg connections, or Neon's HTTP API. */
  transport: 'pg' | 'neon-http';
  seconds: number;
  idealSeconds: number;
  /** Statements the loops sent, per job. */
  statementsPerJob: number;
  /** During the drain: the machine's cores busy (all processes), and the SQL-over-HTTP endpoint's process when apart. */
  load?: { machineBusyCores: number; endpointCores?: number };
}

/**
 * 2. The burst's floor: the same jobs on skiplock's table, drained with the least machinery this
 * machine allows. Every loop (one per invocation the burst may run) starts at once — no tick,
 * fan-out, registration or sweep — on one connection of its own, and keeps `concurrency` jobs on a
 * real timer of `jobMs`: with nothing running, or half its slots free, it completes the jobs that
 * ended (RAW_SCHEMA_COMPLETE) and claims as many as are free (RAW_SCHEMA_CLAIM), as skiplock refills.
 * Its drain over the ideal is what the harness and the machine cost without a library; skiplock's
 * drain over it is the library's share (its start, its statements, its Node work).
 *
 * With `neon`, the loops send the same statements through Neon's HTTP API (one request each, no
 * connection of their own, every statement planned afresh by the server): the floor of a drain on
 * the neon-http driver.
 */
export async function measureBurstFloor(
  url: string,
  params: BurstParams,
  neonOptions?: NeonOptions,
  endpointPid?: number,
): Promise<BurstFloor> {
  const job = defineJob({ kind: 'burst', payload: z.object({ n: z.number() }), handler: async () => {} });
  await seedBurst(url, job, params.jobs);
  const clients = await Promise.all(
    Array.from({ length: params.maxInvocations }, () => (neonOptions ? httpQuery(url, neonOptions) : pgQuery(url))),
  );
  try {
    const machine0 = machineCpu();
    const endpoint0 = endpointPid === undefined ? undefined : processTicks(endpointPid);
    const t0 = performance.now();
    const statements = await Promise.all(clients.map((client) => drainLoop(client.query, params)));
    const seconds = (performance.now() - t0) / 1000;
    const machine1 = machineCpu();
    const endpoint1 = endpointPid === undefined ? undefined : processTicks(endpointPid);
    const busy = ((machine1.busy - machine0.busy) / (machine1.total - machine0.total)) * cpus().length;
    return {
      transport: neonOptions ? 'neon-http' : 'pg',
      seconds: round(seconds, 2),
      idealSeconds: round((params.jobs * params.jobMs) / 1000 / (params.concurrency * params.maxInvocations), 2),
      statementsPerJob: round(statements.reduce((a, b) => a + b, 0) / params.jobs, 2),
      load: {
        machineBusyCores: round(busy, 2),
        ...(endpoint0 !== undefined && endpoint1 !== undefined
          ? { endpointCores: round((endpoint1 - endpoint0) / TICKS_PER_SECOND / seconds, 2) }
          : {}),
      },
    };
  } finally {
    await Promise.all(clients.map((client) => client.end()));
  }
}

/** Sends one statement, resolves with its rows. */
type Query = (text: string, values: unknown[]) => Promise<{ id: string }[]>;

async function pgQuery(url: string): Promise<{ query: Query; end(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return { query: async (text, values) => (await client.query(text, values)).rows, end: () => client.end() };
}

async function httpQuery(url: string, options: NeonOptions): Promise<{ query: Query; end(): Promise<void> }> {
  applyNeonOptions(options);
  const sql = neon(url);
  return { query: async (text, values) => (await sql.query(text, values)) as { id: string }[], end: async () => {} };
}

/** One loop of the floor until the queue is empty and its jobs are done; returns its statement count. */
async function drainLoop(query: Query, { concurrency, jobMs }: BurstParams): Promise<number> {
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
    await query(RAW_SCHEMA_COMPLETE, [ids, token]);
  };
  while (true) {
    const free = concurrency - running;
    if (!dry && free > 0 && (running === 0 || free >= Math.ceil(concurrency / 2))) {
      await complete();
      statements++;
      const rows = await query(RAW_SCHEMA_CLAIM, [free, token, token]);
      if (rows.length === 0) dry = true;
      for (const row of rows) {
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
