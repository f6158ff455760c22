/**
 * `serverless package` for a service folder, offline: Serverless Framework v3 with
 * serverless-esbuild needs no AWS credentials to package, and none are given (packaging must not
 * depend on whoever runs it), nor telemetry or notifications.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The environment `serverless package` runs in: offline, no telemetry, no AWS credentials at all. */
export function offlineServerlessEnv(): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = {
    ...process.env,
    SLS_TELEMETRY_DISABLED: '1',
    SLS_NOTIFICATIONS_MODE: 'off',
  };
  for (const name of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE'])
    delete env[name];
  return env;
}

export async function packageService(options: {
  serviceDir: string;
  outDir: string;
  stage?: string;
  /** serverless.yml's params (`--param name=value`). */
  params?: Record<string, string>;
}): Promise<void> {
  const env = offlineServerlessEnv();
  const args = ['serverless', 'package', '--package', options.outDir, '--stage', options.stage ?? 'dev'];
  for (const [name, value] of Object.entries(options.params ?? {})) args.push(`--param=${name}=${value}`);
  try {
    await run('npx', args, { cwd: options.serviceDir, env, timeout: 180_000, maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    throw new Error(`serverless package failed in ${options.serviceDir}:\n${stdout ?? ''}${stderr ?? ''}`);
  }
}
