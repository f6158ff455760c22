import pg from 'pg';

/** A fresh database per system and phase on the benchmark server. */
export async function freshDatabase(serverUrl: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${name} with (force)`).catch(() => {});
  await admin.end();
}

export async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function vacuumAnalyze(url: string): Promise<void> {
  await withClient(url, (c) => c.query('vacuum analyze').then(() => undefined));
}

/** WAL bytes written while `fn` runs (server-wide: run phases one at a time). */
export async function walBytes(url: string, fn: () => Promise<void>): Promise<number> {
  return withClient(url, async (c) => {
    await c.query('checkpoint');
    const before = (await c.query('select pg_current_wal_lsn() as l')).rows[0].l;
    await fn();
    const after = (await c.query('select pg_current_wal_lsn() as l')).rows[0].l;
    return Number((await c.query('select pg_wal_lsn_diff($1, $2) as d', [after, before])).rows[0].d);
  });
}

/** Polls `count` until it reaches 0; resolves with the time at which it did. */
export async function waitUntilZero(
  count: () => Promise<number>,
  intervalMs = 20,
  timeoutMs = 600_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if ((await count()) === 0) return performance.now();
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  throw new Error('timed out waiting for the queue to drain');
}

/**
 * A connection that counts the jobs not yet finished (queued or running) in the skiplock schema:
 * what a probe polls to know its workers are done. `close` ends it.
 */
export async function openBacklogCounter(url: string): Promise<{ left(): Promise<number>; close(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return {
    left: async () =>
      Number(
        (await client.query(`select count(*) as n from skiplock.jobs where state in ('queued', 'running')`)).rows[0].n,
      ),
    close: () => client.end(),
  };
}

/** Waits until no skiplock job is queued or running (a run's workers are done), on a connection of its own. */
export async function waitUntilDrained(url: string): Promise<void> {
  const backlog = await openBacklogCounter(url);
  try {
    await waitUntilZero(backlog.left);
  } finally {
    await backlog.close();
  }
}
