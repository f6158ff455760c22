/**
 * The environment `serverless package` runs in for the packaging tests: offline, no telemetry,
 * and no AWS credentials at all (packaging must not need them).
 */
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
