import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, portOpen } from '../../scripts/local-postgres.js';

/**
 * A PgBouncer in transaction mode in front of `upstreamUrl` (the `pgbouncer` binary from the
 * system: apt-get install pgbouncer). Clients connect without a password; PgBouncer logs in
 * to Postgres with the upstream URL's credentials.
 */
export async function startPgBouncer(upstreamUrl: string): Promise<{ url: string; stop(): Promise<void> }> {
  const upstream = new URL(upstreamUrl);
  const dir = mkdtempSync(join(tmpdir(), 'skiplock-pgbouncer-'));
  chmodSync(dir, 0o777);
  const port = await freePort();
  const database = upstream.pathname.slice(1) || 'postgres';
  const user = decodeURIComponent(upstream.username || 'postgres');
  const password = decodeURIComponent(upstream.password);
  writeFileSync(join(dir, 'users.txt'), `"${user}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    `[databases]
${database} = host=${upstream.hostname} port=${upstream.port || 5432} dbname=${database} user=${user}${password ? ` password=${password}` : ''}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = trust
auth_file = ${join(dir, 'users.txt')}
pool_mode = transaction
max_client_conn = 200
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
logfile = ${join(dir, 'pgbouncer.log')}
`,
  );
  chmodSync(join(dir, 'pgbouncer.ini'), 0o644);
  chmodSync(join(dir, 'users.txt'), 0o644);
  const args = process.getuid?.() === 0 ? ['-u', 'postgres', join(dir, 'pgbouncer.ini')] : [join(dir, 'pgbouncer.ini')];
  const child: ChildProcess = spawn('pgbouncer', args, { stdio: 'ignore' });
  const failed = new Promise<never>((_, reject) => {
    child.once('error', () => reject(new Error('pgbouncer is not installed (apt-get install pgbouncer)')));
    child.once('exit', (code) => reject(new Error(`pgbouncer exited with code ${code}`)));
  });
  const ready = (async () => {
    for (let i = 0; i < 100 && !(await portOpen('127.0.0.1', port, 200)); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  await Promise.race([ready, failed]);
  const url = `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${database}`;
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
