import { parseArgs } from 'node:util';
import { EnvironmentSettings } from '../adapters/config.js';
import {
  ConfigError,
  DatabaseError,
  DatabaseUnreachableError,
  InvalidOptionsError,
  MigrationLockTimeoutError,
  NotMigratedError,
  OutcomeUnknownError,
  SchemaOutdatedError,
  SkiplockError,
} from '../base/errors.js';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import { connect, DRIVERS, type Driver, type SkiplockDb } from '../db/connect.js';
import { isConnectionFailure } from '../db/execute.js';
import { migrationSql } from '../db/migration-plan.js';
import { MIGRATIONS } from '../db/migrations.generated.js';
import type { CommandContext } from './command-context.js';
import { COMMANDS } from './commands.js';
import { CONTROL_COMMANDS, CONTROL_SUBCOMMANDS } from './control-commands.js';
import { runCrons } from './crons.js';
import { EVENT_COMMANDS, EVENT_SUBCOMMANDS } from './event-commands.js';
import { initProject, isNextApp, isPlatform, PRO_CRONS, TEMPLATES, VERCEL_PLANS, type VercelPlan } from './init.js';
import { type CliIo, EXIT, UsageError } from './io.js';
import { loadJobsModule } from './jobs-module.js';
import { RATE_COMMANDS, RATE_SUBCOMMANDS } from './rate-commands.js';
import { SCHEDULE_COMMANDS, SCHEDULE_SUBCOMMANDS } from './schedule-commands.js';

export { type CliIo, EXIT } from './io.js';

const HELP = `skiplock — operate a skiplock queue

usage: skiplock <command> [options]

commands:
  init lambda|cdk|vercel|next|cloudflare|deno|supabase|netlify [--dir path] [--plan hobby|pro]
                                        write a deployable app into your project (default: the current
                                        folder): job kinds, handlers, serverless.yml, an AWS CDK app,
                                        vercel.json (next: App Router routes; vercel in a Next.js app
                                        does the same), a Worker and wrangler.jsonc, a Deno app, a
                                        Supabase Edge Function and its pg_cron SQL, or Netlify
                                        Functions and netlify.toml; refuses to overwrite existing
                                        files. --plan: the Vercel plan's crons (hobby: 2 daily; pro:
                                        every minute), asked on a terminal, else hobby (it deploys on
                                        every plan)
  crons [--url http://localhost:3000] [--file vercel.json] [--once]
                                        for \`next dev\`: request vercel.json's crons on their schedules
                                        (UTC) with Bearer $CRON_SECRET, as Vercel does; --once: each
                                        once now, exit 1 unless all answered 2xx
  migrate [--lock-timeout ms] [--statement-timeout ms]
                                        apply migrations online: each step commits on its own and waits
                                        at most --lock-timeout (1000) for a table lock, then retries;
                                        --statement-timeout (0: none); builds again an INVALID index;
                                        records a schema the Drizzle path made when it matches.
                                        Migrate first, then deploy
  migrate --print [--objects]           print the SQL migrate applies, for --schema (no database
                                        needed); --objects: only what drizzle-kit cannot generate
  migrate --check                       compare the schema with what this version's migrations create
                                        (missing, changed or unexpected tables, columns, indexes,
                                        constraints; INVALID indexes) and say how: exit 1 on drift
  enqueue <kind> --payload <json>       enqueue a job (needs --jobs)
      [--queue q] [--priority n] [--delay ms] [--run-at iso] [--deadline iso] [--max-attempts n]
      [--dedupe-key k] [--dedupe-mode skip|replace|window] [--window-ms n] [--correlation-id id]
      [--after id,id…] [--on-parent-failure cancel|run]
                                        --after: run once those jobs completed
  stats [--watch] [--interval ms] [--window s]
                                        depth per queue and kind; throughput and error rate over the window (300 s)
  jobs list [--state s] [--queue q] [--kind k] [--since iso] [--limit n]
  jobs show <id>                        one job: payload (masked), attempts, errors, lease, provenance
  jobs why <id>                         why it does not run now: every hold with its evidence and
                                        when it ends, or that it is ready (--jobs: the code's limits too)
  dlq list [--reason r] [--kind k] [--queue q] [--since iso] [--limit n]
  dlq replay <id...>                    replay dead jobs by id, or by filter:
      [--kind k] [--queue q] [--reason r] [--since iso] [--until iso] [--all]
      [--dry-run] [--limit n] [--keep-attempts] [--by name]
      [--from-step name | --restart]   durable steps: run again from this one, or all
                                        (default: resume at the failed step)
  dlq move <id...> [--reason r] [--by name]
                                        move queued or running jobs to the DLQ (reason: manual)
  cancel <id...>                        cancel queued or running jobs
  retry <id...>                         run waiting jobs now
  queues pause <queue> [--reason text] [--by name]
                                        no invocation claims the queue's jobs from the next claim on;
                                        running jobs finish; nothing else changes
  queues resume <queue>                 its jobs are claimable again at once
  kinds pause <kind> [--reason text] [--by name]
  kinds resume <kind>                   the same, for one kind in every queue
  pauses                                what is paused, since when, by whom and why
  queues limit <queue> <n> [--per-key] [--reason text] [--by name]
                                        at most n of its jobs (with --per-key: of each concurrency key)
                                        run at once, from the next claim on; overrides the code's limit
  queues unlimit <queue> [--per-key]    clear that run-time limit: the code's limit applies again
  kinds limit <kind> <n> [--reason text] [--by name]
  kinds unlimit <kind>                  the same, for one kind
  limits                                the run-time limits and what runs under them (with --jobs:
                                        also the limits the code declares)
  breakers                              destinations and their circuit breakers: state, failures and
                                        attempts in the window, since when, next probe, Retry-After
  breakers reset <destination> [--by name]
                                        close the breaker and end any deferral: its jobs are claimable
                                        from the next claim on
  rate-limits                           the run-time rate limits, and the scopes that started jobs
                                        within their period (with --jobs: also the code's rates)
  rate-limits set queue|kind|destination <name> <rate> [--per-key] [--reason text] [--by name]
                                        at most that many starts per period (10/s, 100/min, 5/2s,
                                        1000/h) from the next claim on; destination * sets one for
                                        each destination; overrides the code's rate
  rate-limits clear queue|kind|destination <name> [--per-key]
                                        clear that run-time rate: the code's rate applies again
  schedules [--limit n]                 the recurring schedules, code and run-time (source column): cron
                                        or interval, time zone, kind, last and next occurrence, last job
                                        (code schedules; with --jobs: also those the module's \`schedules\`
                                        defines and no tick has recorded yet; at most --limit run-time
                                        ones, 1000)
  schedules create <key> <kind> --cron expr|--every ms [--timezone tz] [--payload json] [--start iso]
      [--end iso] [--missed last|skip|N] [--queue q] [--priority n] [--max-attempts n] [--replace]
                                        a run-time schedule (needs --jobs: the payload is checked by the
                                        kind's schema); --replace rewrites one that exists
  schedules show <key>                  a run-time schedule as stored: next run, version, options
  schedules pause|resume|delete <key>   stop a run-time schedule, start it again from now (what it
                                        missed is not made up), or remove it
  schedules tick                        enqueue the due occurrences now, as a worker's tick would: of the
                                        run-time schedules, and with --jobs of the module's \`schedules\`
  sync [--prune]                        write the module's subscribers' subscriptions (run it at deploy,
                                        after migrate; needs --jobs); --prune retires those not in it
  events [list] [--name n] [--from t] [--to t] [--unsubscribed] [--limit n]
                                        events published, newest first: subscribers (0: no subscriber)
  events show <id>                      an event, and each subscriber's job with its state
  events replay <subscription> --from t [--to t] [--limit n]
                                        write the subscriber's jobs for the events in that range it has
                                        none for (idempotent)
  events subscriptions                  the subscriptions the database holds, active and retired

global options:
  --json                  machine-readable output (one JSON document)
  --database-url url      default: $DATABASE_URL
  --schema name           default: $SKIPLOCK_SCHEMA or skiplock
  --driver d              pg (default), neon-ws, neon-http; default: $SKIPLOCK_DRIVER
  --jobs module           a module exporting \`jobs\` (your job kinds) and optionally \`schedules\`: enables enqueue, payload
                          masking; default: $SKIPLOCK_JOBS_MODULE. A .ts module loads through your app's tsx
                          (npm install --save-dev tsx), or Node's own type stripping (Node 22.18+)

environment (read as the deployed functions read it):
  SKIPLOCK_NEON_WS_PROXY        neon-ws: host:port[/path] of a WebSocket proxy in front of a plain Postgres
                                (Neon's local stand-in), instead of Neon's
  SKIPLOCK_NEON_FETCH_ENDPOINT  neon-http: the URL of a SQL-over-HTTP endpoint, instead of Neon's

exit codes: 0 ok, 1 refused (e.g. a job was not dead, a schema drifted, migrated by another
version or made without skiplock's journal) or a statement the database rejected (its message and
SQLSTATE are printed), 2 usage, 3 database unreachable, an answer lost after the statement was
sent (it may have been carried out), not migrated, older than this version or locked too long for
a migration, 4 configuration`;

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  'database-url': { type: 'string' },
  schema: { type: 'string' },
  driver: { type: 'string' },
  jobs: { type: 'string' },
  payload: { type: 'string' },
  queue: { type: 'string' },
  priority: { type: 'string' },
  delay: { type: 'string' },
  'run-at': { type: 'string' },
  deadline: { type: 'string' },
  'max-attempts': { type: 'string' },
  'dedupe-key': { type: 'string' },
  'dedupe-mode': { type: 'string' },
  'window-ms': { type: 'string' },
  'correlation-id': { type: 'string' },
  after: { type: 'string' },
  'on-parent-failure': { type: 'string' },
  watch: { type: 'boolean' },
  interval: { type: 'string' },
  window: { type: 'string' },
  iterations: { type: 'string' },
  state: { type: 'string' },
  kind: { type: 'string' },
  reason: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  limit: { type: 'string' },
  all: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  'keep-attempts': { type: 'boolean' },
  'from-step': { type: 'string' },
  restart: { type: 'boolean' },
  by: { type: 'string' },
  dir: { type: 'string' },
  plan: { type: 'string' },
  'per-key': { type: 'boolean' },
  print: { type: 'boolean' },
  objects: { type: 'boolean' },
  check: { type: 'boolean' },
  'lock-timeout': { type: 'string' },
  'statement-timeout': { type: 'string' },
  url: { type: 'string' },
  file: { type: 'string' },
  once: { type: 'boolean' },
  name: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  unsubscribed: { type: 'boolean' },
  prune: { type: 'boolean' },
  cron: { type: 'string' },
  every: { type: 'string' },
  timezone: { type: 'string' },
  start: { type: 'string' },
  end: { type: 'string' },
  missed: { type: 'string' },
  replace: { type: 'boolean' },
} as const;

/** Runs one CLI command; returns the exit code. Never throws. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    io.err(`${(err as Error).message}\nrun \`skiplock --help\` for usage`);
    return EXIT.usage;
  }
  const { values: o, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (o.help || !command) {
    io.out(HELP);
    return o.help ? EXIT.ok : EXIT.usage;
  }
  const json = o.json ?? false;
  const emit = (human: string, data: unknown) => io.out(json ? JSON.stringify(data, null, 2) : human);
  if (command === 'init') return init(rest, o.dir ?? '.', o.plan, io, json);
  if (command === 'crons') {
    return runCrons(
      { url: o.url ?? 'http://localhost:3000', file: o.file ?? 'vercel.json', once: o.once ?? false },
      io,
    );
  }
  if (command === 'migrate' && o.print) return printMigrations(o.schema ?? io.env.SKIPLOCK_SCHEMA, o.objects, io);
  const sub = SUBCOMMANDS.has(command);
  // `breakers` alone lists; `breakers reset <destination>` resets.
  const key = sub && rest.length > 0 ? `${command} ${rest[0]}` : command;
  const handler =
    COMMANDS[key] ?? CONTROL_COMMANDS[key] ?? RATE_COMMANDS[key] ?? SCHEDULE_COMMANDS[key] ?? EVENT_COMMANDS[key];
  if (!handler) {
    io.err(
      `unknown command "${[command, ...(sub ? rest.slice(0, 1) : [])].join(' ')}"\nrun \`skiplock --help\` for usage`,
    );
    return EXIT.usage;
  }
  let conn: SkiplockDb | undefined;
  try {
    if (o['database-url'] === '') {
      throw new ConfigError(
        '--database-url is empty: the variable it was given (e.g. DATABASE_URL_UNPOOLED) is not set',
      );
    }
    const url = o['database-url'] ?? io.env.DATABASE_URL;
    if (!url) throw new ConfigError('no database: set DATABASE_URL or pass --database-url');
    if (o.driver !== undefined && !(DRIVERS as readonly string[]).includes(o.driver))
      throw new UsageError(`--driver must be one of ${DRIVERS.join(', ')}`);
    // The deployed functions' variables and parser: SKIPLOCK_DRIVER, and where Neon's drivers connect
    // when not to Neon (SKIPLOCK_NEON_WS_PROXY, SKIPLOCK_NEON_FETCH_ENDPOINT).
    const { driver, neon } = new EnvironmentSettings(io.env).connection(o.driver as Driver | undefined);
    const schema = o.schema ?? io.env.SKIPLOCK_SCHEMA ?? 'skiplock';
    // A migration's concurrent index build may take minutes and is a statement of its own: the
    // connection carries --statement-timeout (default none), with no client-side limit.
    const migrating = command === 'migrate';
    const statementTimeout = Number(o['statement-timeout'] ?? 0);
    conn = connect({
      connectionString: url,
      driver,
      neon,
      max: 2,
      connectionTimeoutMs: 5_000,
      ...(migrating && Number.isFinite(statementTimeout)
        ? { queryTimeoutMs: 0, statementTimeoutMs: Math.max(0, statementTimeout) }
        : {}),
    });
    const { registry, schedules } = await loadJobsModule(o.jobs ?? io.env.SKIPLOCK_JOBS_MODULE);
    const ctx: CommandContext = {
      conn,
      schema,
      registry,
      schedules,
      o,
      rest: sub ? rest.slice(1) : rest,
      emit,
      io,
      json,
    };
    return await handler(ctx);
  } catch (err) {
    const failure = failureOf(err);
    // With --json a failure is one JSON document too (on stdout, beside the exit code), for scripts.
    if (json) io.out(JSON.stringify({ error: { code: failure.code, message: failure.message } }, null, 2));
    else io.err(failure.message);
    return failure.exit;
  } finally {
    await conn?.close().catch(() => {});
  }
}

/** What a command that threw says, under which code, and its exit status. */
function failureOf(err: unknown): { message: string; code: string; exit: number } {
  if (err instanceof UsageError) {
    return { message: `${err.message}\nrun \`skiplock --help\` for usage`, code: 'usage', exit: EXIT.usage };
  }
  if (
    err instanceof NotMigratedError ||
    err instanceof SchemaOutdatedError ||
    err instanceof MigrationLockTimeoutError
  ) {
    return { message: err.message, code: err.code, exit: EXIT.database };
  }
  if (err instanceof SkiplockError && REFUSED_MIGRATIONS.has(err.code)) {
    return { message: err.message, code: err.code, exit: EXIT.refused };
  }
  if (err instanceof DatabaseUnreachableError || err instanceof OutcomeUnknownError) {
    return { message: err.message, code: err.code, exit: EXIT.database };
  }
  if (err instanceof DatabaseError) {
    if (isConnectionFailure(err.sqlState)) {
      return { message: `cannot reach the database: ${err.message}`, code: err.code, exit: EXIT.database };
    }
    // The server answered: a permission, a conflicting object, a timeout — not a network problem.
    return {
      message: `the database rejected a statement: ${err.message} (SQLSTATE ${err.sqlState})`,
      code: err.code,
      exit: EXIT.refused,
    };
  }
  if (err instanceof InvalidOptionsError || (err instanceof SkiplockError && err.code !== 'config_error')) {
    return { message: err.message, code: (err as SkiplockError).code, exit: EXIT.usage };
  }
  if (err instanceof SkiplockError) return { message: err.message, code: err.code, exit: EXIT.config };
  return {
    message: `unexpected error: ${err instanceof Error ? err.message : String(err)}`,
    code: 'internal',
    exit: EXIT.config,
  };
}

/** A schema migrate will not touch as it is: the message says what to do (exit 1). */
const REFUSED_MIGRATIONS = new Set([
  'migration_mismatch',
  'migrated_by_newer_version',
  'legacy_migrations',
  'unjournaled_schema',
  'migration_failed',
]);

/** `migrate --print` needs no database: it renders this version's migrations for the schema. */
function printMigrations(schema: string | undefined, objectsOnly: boolean | undefined, io: CliIo): number {
  try {
    io.out(migrationSql(MIGRATIONS, assertSchemaName(schema ?? DEFAULT_SCHEMA), { objectsOnly: objectsOnly ?? false }));
    return EXIT.ok;
  } catch (err) {
    io.err(err instanceof Error ? err.message : String(err));
    return EXIT.usage;
  }
}

/**
 * `init` needs no database: it only writes files. `init vercel` in a Next.js app writes the Next.js
 * route handlers (a Next.js app ignores a root api/ folder).
 */
async function init(
  rest: readonly string[],
  dir: string,
  planOption: string | undefined,
  io: CliIo,
  json: boolean,
): Promise<number> {
  const [asked, extra] = rest;
  const usage = `usage: skiplock init ${Object.keys(TEMPLATES).join('|')} [--dir path] [--plan hobby|pro]`;
  if (!isPlatform(asked) || extra !== undefined) {
    io.err(`${usage}\nrun \`skiplock --help\` for usage`);
    return EXIT.usage;
  }
  const platform = asked === 'vercel' && isNextApp(dir) ? 'next' : asked;
  const onVercel = platform === 'vercel' || platform === 'next';
  if (planOption !== undefined && !VERCEL_PLANS.includes(planOption as VercelPlan)) {
    io.err(`--plan must be hobby or pro\n${usage}`);
    return EXIT.usage;
  }
  let plan = planOption as VercelPlan | undefined;
  let planNote = '';
  if (onVercel && plan === undefined) {
    if (io.ask && !json) {
      plan = (await io.ask('Which Vercel plan deploys this app? hobby: 2 daily crons; pro: crons every minute', [
        'hobby',
        'pro',
      ])) as VercelPlan;
    } else {
      // Hobby's crons deploy on every plan; Pro's per-minute crons fail a Hobby deploy.
      plan = 'hobby';
      planNote =
        "vercel.json has Hobby's crons (2, daily), which deploy on every plan. On Pro, run init with --plan pro " +
        'in a fresh folder, or replace vercel.json\'s "crons" with\n' +
        `${JSON.stringify(PRO_CRONS)}\n`;
    }
  }
  const result = initProject(platform, dir, { plan });
  if (result.existing.length > 0) {
    const message = `refusing to overwrite existing files in ${dir}: ${result.existing.join(', ')}; nothing was written`;
    if (json) io.out(JSON.stringify({ written: [], existing: result.existing }, null, 2));
    else io.err(message);
    return EXIT.refused;
  }
  const problems = result.planProblems ?? [];
  if (json) {
    const { written, merged, nextSteps } = result;
    io.out(JSON.stringify({ platform, plan, written, merged, planProblems: problems, nextSteps }, null, 2));
    return EXIT.ok;
  }
  if (problems.length > 0) {
    // Merged into a vercel.json of the app's own: the app's crons and skiplock's together break Hobby's rules.
    io.err(
      `vercel.json will not deploy on Hobby: ${problems.join('; ')}. Remove crons of your own from vercel.json ` +
        '(Hobby allows 2, each at most daily), or on Pro run again with --plan pro',
    );
  } else if (planNote) io.out(planNote);
  if (platform !== asked)
    io.out('this is a Next.js app (its package.json depends on next): writing App Router routes\n');
  const merged = result.merged.length > 0 ? `; added the crons to ${result.merged.join(', ')}` : '';
  io.out(`wrote ${result.written.join(', ')} in ${dir}${merged}\n\n${result.nextSteps}`);
  return EXIT.ok;
}

const SUBCOMMANDS = new Set([
  'jobs',
  'dlq',
  ...CONTROL_SUBCOMMANDS,
  ...RATE_SUBCOMMANDS,
  ...SCHEDULE_SUBCOMMANDS,
  ...EVENT_SUBCOMMANDS,
]);
