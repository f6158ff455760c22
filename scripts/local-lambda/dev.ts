/**
 * `npm run dev -- --lambda`: serverless.yml's functions on localhost, run as Lambda runs them.
 * Packages the app (`serverless package`, offline) into .serverless — or, with `--packaged <dir>`,
 * runs what a `serverless package` already wrote there — and starts the local Lambda emulator (the
 * Invoke API on LAMBDA_PORT, default 3001), the httpApi routes on PORT (default 3000) and the
 * rate() schedules (each once at start, then on its interval). The functions get the dev database
 * as DATABASE_URL, which wins over their DATABASE_SECRET_ID, so no Secrets Manager is needed.
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { startHttpApi } from './http-api.js';
import { packageService } from './package.js';
import { startSchedules } from './schedules.js';
import { type Outcome, startLocalLambda } from './server.js';
import { readPackagedTemplate } from './template.js';

// Set in the shell, these reach the functions over the template's values.
const PASSED_THROUGH = ['WEBHOOK_SIGNING_SECRET', 'EMAIL_API_URL', 'SKIPLOCK_LOG_LEVEL'] as const;

function describeOutcome(outcome: Outcome | 'throttled'): string {
  if (outcome === 'throttled') return 'throttled';
  if (!outcome.ok) return `${outcome.error.errorType}: ${outcome.error.errorMessage}`;
  const text = JSON.stringify(outcome.result);
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/** Starts everything; resolves with the function that stops it all. */
export async function serveLambda(database: { url: string; embedded: boolean }, args: readonly string[]) {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  const packagedAt = args.indexOf('--packaged');
  const packageDir = packagedAt >= 0 ? resolve(args[packagedAt + 1] ?? '.') : join(root, '.serverless');
  if (packagedAt < 0) {
    const started = performance.now();
    console.log('packaging serverless.yml (serverless package --stage dev --param=idle=false, offline)…');
    // No EventBridge Scheduler runs here to fire one-off wake-ups: the rules tick every minute as
    // they do with idle off, so a job written without a nudge still runs within a minute.
    await packageService({ serviceDir: root, outDir: packageDir, stage: 'dev', params: { idle: 'false' } });
    console.log(`packaged in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  const template = readPackagedTemplate(packageDir);

  if (!process.env.SKIPLOCK_ENQUEUE_TOKEN) {
    process.env.SKIPLOCK_ENQUEUE_TOKEN = randomBytes(16).toString('hex');
    console.log(`SKIPLOCK_ENQUEUE_TOKEN=${process.env.SKIPLOCK_ENQUEUE_TOKEN}  (generated for this session)`);
  }
  if (!process.env.SKIPLOCK_ADMIN_TOKEN) {
    process.env.SKIPLOCK_ADMIN_TOKEN = randomBytes(16).toString('hex');
    console.log(
      `SKIPLOCK_ADMIN_TOKEN=${process.env.SKIPLOCK_ADMIN_TOKEN}  (generated for this session: POST /control, the console at /admin)`,
    );
  }
  // The functions' schema: the shell's, else the one serverless.yml gives them.
  const schema =
    process.env.SKIPLOCK_SCHEMA ??
    template.functions.find((f) => f.environment.SKIPLOCK_SCHEMA)?.environment.SKIPLOCK_SCHEMA;
  const db = connect({ connectionString: database.url });
  const migrated = await migrate(db, { schema });
  await db.close();
  console.log(
    `database: ${database.embedded ? 'embedded Postgres' : 'DATABASE_URL'}, schema "${migrated.schema}" up to date`,
  );

  const environment: Record<string, string> = {
    DATABASE_URL: database.url,
    SKIPLOCK_SCHEMA: migrated.schema,
    SKIPLOCK_ENQUEUE_TOKEN: process.env.SKIPLOCK_ENQUEUE_TOKEN,
    SKIPLOCK_ADMIN_TOKEN: process.env.SKIPLOCK_ADMIN_TOKEN,
  };
  for (const name of PASSED_THROUGH) {
    const value = process.env[name];
    if (value !== undefined) environment[name] = value;
  }
  // A folder per session, inside the repository (see code.ts), removed at the end.
  const codeDir = join(root, '.local-lambda', `dev-${process.pid}`);
  const lambda = await startLocalLambda({
    packageDir,
    codeDir,
    port: Number(process.env.LAMBDA_PORT ?? 3001),
    environment,
  });
  for (const warning of template.warnings) console.log(`warning: ${warning}`);
  const caps = template.functions.map(
    (f) => `${f.name}${f.reservedConcurrency ? ` (≤ ${f.reservedConcurrency})` : ''}`,
  );
  console.log(`lambda: Invoke API on ${lambda.url} (AWS_ENDPOINT_URL_LAMBDA); functions: ${caps.join(', ')}`);

  const api = await startHttpApi(lambda, template.routes, Number(process.env.PORT ?? 3000));
  const routes = template.routes.map((r) => `${r.method} ${r.path} → ${r.functionName}`);
  console.log(`listening on ${api.url}  (routes: ${routes.join(', ')})`);

  const schedules = startSchedules(lambda, template.schedules, (name, outcome) =>
    console.log(`schedule ${name} → ${describeOutcome(outcome)}`),
  );
  console.log(`schedules: ${schedules.described.join(', ')}; running each once now`);

  return async () => {
    schedules.stop();
    await api.close();
    await lambda.close();
    rmSync(codeDir, { recursive: true, force: true });
  };
}
