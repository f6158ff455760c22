import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * `skiplock init lambda|cdk|vercel|next|cloudflare|deno|supabase|netlify`: the deployable app of
 * this repository, copied into a user's project. The package ships these very files (package.json
 * "files"), so what `init` writes is what this repository packages and tests in CI. Lambda and
 * Vercel's files are this repository's own app, written to the same paths; templates/<platform>/
 * holds the rest, written without that prefix: the AWS CDK app beside the Lambda functions,
 * Next.js's route handlers (its `app/` folder, `functions/idle-hints.ts` that they share, and a
 * vercel.json of crons only: maxDuration is each route's segment config), a Cloudflare Worker and
 * its wrangler.jsonc, a Deno app, Netlify's functions and netlify.toml. Every platform shares the
 * example kinds of functions/jobs.ts; Supabase's files go under supabase/ (SUPABASE_TARGETS).
 */
/** The Lambda functions and their jobs module: deployed by serverless.yml or by the CDK app. */
const LAMBDA_FUNCTIONS = [
  'functions/jobs.ts',
  'functions/worker.ts',
  'functions/enqueue.ts',
  'functions/replay.ts',
  'functions/control.ts',
  'functions/signal.ts',
  'functions/console.ts',
  'functions/maintenance.ts',
] as const;

export const TEMPLATES = {
  lambda: ['serverless.yml', ...LAMBDA_FUNCTIONS],
  vercel: [
    'vercel.json',
    'functions/jobs.ts',
    'api/worker.ts',
    'api/reports-worker.ts',
    'api/enqueue.ts',
    'api/replay.ts',
    'api/control.ts',
    'api/signal.ts',
    'api/admin.ts',
    'api/maintenance.ts',
  ],
  cdk: [
    'templates/cdk/cdk.json',
    'templates/cdk/cdk/app.ts',
    'templates/cdk/cdk/skiplock-stack.ts',
    ...LAMBDA_FUNCTIONS,
  ],
  next: [
    'templates/next/vercel.json',
    'functions/jobs.ts',
    'templates/next/functions/idle-hints.ts',
    'templates/next/app/api/worker/route.ts',
    'templates/next/app/api/reports-worker/route.ts',
    'templates/next/app/api/enqueue/route.ts',
    'templates/next/app/api/replay/route.ts',
    'templates/next/app/api/control/route.ts',
    'templates/next/app/api/signal/route.ts',
    'templates/next/app/api/maintenance/route.ts',
    'templates/next/app/admin/[[...path]]/route.ts',
  ],
  cloudflare: [
    'templates/cloudflare/wrangler.jsonc',
    'templates/cloudflare/src/skiplock.ts',
    'templates/cloudflare/src/unused-peers.ts',
    'functions/jobs.ts',
  ],
  deno: ['templates/deno/deno.json', 'templates/deno/main.ts', 'functions/jobs.ts'],
  supabase: [
    'templates/supabase/functions/skiplock/index.ts',
    'templates/supabase/functions/skiplock/deno.json',
    'functions/jobs.ts',
    'templates/supabase/skiplock-cron.sql',
  ],
  netlify: [
    'templates/netlify/netlify.toml',
    'templates/netlify/netlify/functions/skiplock.ts',
    'templates/netlify/netlify/functions/skiplock-worker.ts',
    'templates/netlify/netlify/functions/skiplock-worker-background.ts',
    'templates/netlify/netlify/functions/skiplock-maintenance.ts',
    'functions/jobs.ts',
  ],
} as const;

/**
 * Where Supabase's files go: the CLI deploys supabase/functions/<name>/, and functions share code
 * from supabase/functions/_shared/ (the function's deno.json maps the packages its imports name).
 */
const SUPABASE_TARGETS: Record<(typeof TEMPLATES.supabase)[number], string> = {
  'templates/supabase/functions/skiplock/index.ts': 'supabase/functions/skiplock/index.ts',
  'templates/supabase/functions/skiplock/deno.json': 'supabase/functions/skiplock/deno.json',
  'functions/jobs.ts': 'supabase/functions/_shared/jobs.ts',
  'templates/supabase/skiplock-cron.sql': 'supabase/skiplock-cron.sql',
};

export type Platform = keyof typeof TEMPLATES;

export function isPlatform(name: string | undefined): name is Platform {
  return name !== undefined && Object.hasOwn(TEMPLATES, name);
}

/**
 * How an app installs skiplock: exactly the commands of the README's "Install into your app",
 * which test/unit/docs-figures.test.ts compares with these. No registry release exists yet, so the
 * app ships the packed tarball in its own vendor/ folder (scripts/vendor.ts), a path that a clone
 * of the app also has; test/e2e/next-app.test.ts builds such a clone.
 */
export function installCommands(): readonly string[] {
  const { version } = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
  return [
    'git clone <repo> skiplock && cd skiplock && npm ci',
    'npm run vendor -- ../my-app',
    `cd ../my-app && npm install ./vendor/skiplock-${version}.tgz zod drizzle-orm`,
    `git add vendor package.json package-lock.json && git commit -m "skiplock ${version}"`,
  ];
}

/** The first of the next steps: install skiplock, as the README says. */
function installStep(): string {
  return `1. pack skiplock into your app's vendor/ from a clone of it, install it from there and commit vendor/
     with the lockfile, so a deploy installs the same file (README: "Install into your app"):
${installCommands()
  .map((command) => `     ${command}`)
  .join('\n')}`;
}

const NEXT_STEPS: Record<Platform, string> = {
  lambda: `next steps:
  {install}
     npm install -D serverless@3 serverless-esbuild esbuild
  2. replace the example kinds in functions/jobs.ts with your own (every function imports them);
     every kind's queue must be one a worker in serverless.yml serves (SKIPLOCK_QUEUES: emails,webhooks
     and reports here) — a kind without \`queue\` is on 'default', which none of them serves;
     \`skiplock stats\` flags ready jobs no worker serves
  3. store the database URL in Secrets Manager:
     aws secretsmanager create-secret --name skiplock/database --secret-string 'postgres://…'
  4. DATABASE_URL=postgres://… npx skiplock migrate
     DATABASE_URL=postgres://… npx skiplock sync --jobs functions/jobs.ts   # with events (Node < 22.18: npm i -D tsx)
  5. npx serverless package        # builds the bundles offline, no AWS credentials needed
     npx serverless deploy --param="databaseSecretArn=arn:aws:secretsmanager:…" --param="enqueueToken=$(openssl rand -hex 24)"`,
  cdk: `next steps:
  {install}
     npm install -D aws-cdk aws-cdk-lib constructs esbuild tsx
  2. replace the example kinds in functions/jobs.ts with your own (every function imports them);
     every kind's queue must be one a worker in cdk/skiplock-stack.ts serves (WORKERS: emails,webhooks
     and reports here) — a kind without \`queue\` is on 'default', which none of them serves;
     \`skiplock stats\` flags ready jobs no worker serves
  3. store the database URL in Secrets Manager, and its ARN in cdk.json's context ("databaseSecretArn"):
     aws secretsmanager create-secret --name skiplock/database --secret-string 'postgres://…'
  4. DATABASE_URL=postgres://… npx skiplock migrate
     DATABASE_URL=postgres://… npx skiplock sync --jobs functions/jobs.ts   # with events (Node < 22.18: npm i -D tsx)
  5. npx cdk synth                 # bundles the functions with esbuild, offline, no AWS credentials
     npx cdk bootstrap             # once per account and region
     npx cdk deploy -c enqueueToken=$(openssl rand -hex 24) -c adminToken=$(openssl rand -hex 24)`,
  next: `next steps:
  {install}
     npm install @vercel/functions   # the routes import it: idle ticks' Runtime Cache (functions/idle-hints.ts)
  2. replace the example kinds in functions/jobs.ts with your own (every route imports them);
     every kind's queue must be one a worker route serves (app/api/worker: SKIPLOCK_QUEUES, every
     queue when unset; app/api/reports-worker: reports); \`skiplock stats\` flags ready jobs no worker serves
  3. set the project's variables: DATABASE_URL, SKIPLOCK_DRIVER (neon-http or neon-ws for Neon),
     CRON_SECRET, SKIPLOCK_ENQUEUE_TOKEN and SKIPLOCK_ADMIN_TOKEN (16+ characters each), and for
     nudges SKIPLOCK_NUDGE_ROUTES='emails,webhooks=/api/worker;reports=/api/reports-worker'
  4. DATABASE_URL=postgres://… npx skiplock migrate
     DATABASE_URL=postgres://… npx skiplock sync --jobs functions/jobs.ts   # with events (Node < 22.18: npm i -D tsx)
  5. next build && next start, then: curl -H "Authorization: Bearer $CRON_SECRET" localhost:3000/api/worker
     runs the worker once; the console is at /admin; vercel deploy runs the crons in vercel.json`,
  vercel: `next steps:
  {install}
     npm install @vercel/functions   # idle ticks' Runtime Cache, and the waitUntil of nudges (loaded when used)
  2. replace the example kinds in functions/jobs.ts with your own (every route imports them);
     every kind's queue must be one a worker route serves (api/worker.ts: SKIPLOCK_QUEUES, every queue
     when unset; api/reports-worker.ts: reports); \`skiplock stats\` flags ready jobs no worker serves
  3. set the project's variables: DATABASE_URL, SKIPLOCK_DRIVER (neon-http or neon-ws for Neon),
     CRON_SECRET, SKIPLOCK_ENQUEUE_TOKEN and SKIPLOCK_ADMIN_TOKEN (16+ characters each), e.g. vercel env add CRON_SECRET
  4. DATABASE_URL=postgres://… npx skiplock migrate
     DATABASE_URL=postgres://… npx skiplock sync --jobs functions/jobs.ts   # with events (Node < 22.18: npm i -D tsx)
  5. vercel deploy`,
  cloudflare: `next steps:
  {install}
     npm install -D wrangler
  2. replace the example kinds in functions/jobs.ts with your own (src/skiplock.ts imports them); each
     kind's timeoutMs must fit the Worker's 30 s (limits.cpu_ms, cpuMs) less the safety margin: the
     Worker refuses to load otherwise
  3. the database: Neon, or any Postgres behind Neon's HTTP API (the Worker reaches it by fetch); set
     the secrets, once each: npx wrangler secret put DATABASE_URL, then the same for CRON_SECRET,
     SKIPLOCK_ENQUEUE_TOKEN, SKIPLOCK_ADMIN_TOKEN (16+ characters each) and SKIPLOCK_SIGNAL_SECRET (32+)
  4. DATABASE_URL=postgres://… npx skiplock migrate
     DATABASE_URL=postgres://… npx skiplock sync --jobs functions/jobs.ts   # with events (Node < 22.18: npm i -D tsx)
  5. npx wrangler deploy --dry-run --outdir .wrangler/dry-run   # bundles offline, no Cloudflare account needed
     npx wrangler deploy          # the Worker, its routes and its Cron Triggers (wrangler.jsonc)`,
  deno: `next steps:
  {install}
  2. replace the example kinds in functions/jobs.ts with your own (main.ts imports them; deno.json
     resolves skiplock from node_modules)
  3. set the variables (Deno Deploy: the app's environment variables): DATABASE_URL, SKIPLOCK_DRIVER
     (neon-http, or pg), CRON_SECRET, SKIPLOCK_ENQUEUE_TOKEN, SKIPLOCK_ADMIN_TOKEN (16+ characters each),
     SKIPLOCK_SIGNAL_SECRET (32+), and for nudges SKIPLOCK_BASE_URL (the app's URL) and
     SKIPLOCK_NUDGE_ROUTES='*=/skiplock/worker'
  4. DATABASE_URL=postgres://… npx skiplock migrate
     DATABASE_URL=postgres://… npx skiplock sync --jobs functions/jobs.ts   # with events (Node < 22.18: npm i -D tsx)
  5. deno task start              # every route on :8000; Deno.cron runs the worker and maintenance
     deno deploy                  # Deno Deploy`,
  supabase: `next steps:
  {install}
  2. replace the example kinds in supabase/functions/_shared/jobs.ts with your own (the function
     imports them; its deno.json resolves skiplock from node_modules)
  3. set the secrets: supabase secrets set DATABASE_URL='postgres://…' SKIPLOCK_DRIVER=pg CRON_SECRET=…
     SKIPLOCK_ENQUEUE_TOKEN=… SKIPLOCK_ADMIN_TOKEN=… (16+ characters each) SKIPLOCK_SIGNAL_SECRET=… (32+)
     SKIPLOCK_BASE_URL=https://<project>.supabase.co/functions/v1 SKIPLOCK_NUDGE_ROUTES='*=/skiplock/skiplock/worker'
  4. DATABASE_URL=postgres://… npx skiplock migrate
     DATABASE_URL=postgres://… npx skiplock sync --jobs supabase/functions/_shared/jobs.ts   # with events (Node < 22.18: npm i -D tsx)
  5. supabase functions deploy skiplock --no-verify-jwt   # its routes check skiplock's own secrets
     then run supabase/skiplock-cron.sql in the SQL editor (CRON_SECRET in Vault first, <project> replaced):
     pg_cron requests the worker each minute and maintenance every 5`,
  netlify: `next steps:
  {install}
     npm install -D netlify-cli
  2. replace the example kinds in functions/jobs.ts with your own (netlify/functions/ imports them);
     each kind's timeoutMs must fit the scheduled worker's 30 s less the safety margin: the function
     refuses to load otherwise
  3. set the variables, once each: npx netlify env:set DATABASE_URL 'postgres://…', then SKIPLOCK_DRIVER
     (pg), CRON_SECRET, SKIPLOCK_ENQUEUE_TOKEN, SKIPLOCK_ADMIN_TOKEN (16+ characters each),
     SKIPLOCK_SIGNAL_SECRET (32+), SKIPLOCK_BASE_URL (the site's URL) and
     SKIPLOCK_NUDGE_ROUTES='*=/.netlify/functions/skiplock-worker-background'
  4. DATABASE_URL=postgres://… npx skiplock migrate
     DATABASE_URL=postgres://… npx skiplock sync --jobs functions/jobs.ts   # with events (Node < 22.18: npm i -D tsx)
  5. npx netlify deploy --build --prod   # the functions; Netlify runs the scheduled ones on their schedules`,
};

/** What `init` prints after writing the platform's files. */
export function nextStepsOf(platform: Platform): string {
  return NEXT_STEPS[platform].replace('{install}', installStep());
}

export interface InitResult {
  written: string[];
  /** Why the vercel.json written would not deploy on Hobby (a merged file's own crons). */
  planProblems?: string[];
  /** Files that already exist: nothing was written. */
  existing: string[];
  /** Existing files that gained what the template adds (vercel.json's crons). */
  merged: string[];
  nextSteps: string;
}

/** The root of the installed package (or of this repository, when run from source). */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (true) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'skiplock') {
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the skiplock package root');
    dir = parent;
  }
}

/** A Next.js app: its package.json depends on `next`. */
export function isNextApp(dir: string): boolean {
  try {
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Record<string, unknown>;
    return ['dependencies', 'devDependencies'].some((field) => {
      const deps = manifest[field];
      return typeof deps === 'object' && deps !== null && 'next' in deps;
    });
  } catch {
    return false;
  }
}

/**
 * Where a template file goes in the user's project: out of templates/<platform>/, for Supabase
 * under supabase/, and for Next.js under src/ when the app keeps its `app` folder there
 * (vercel.json stays at the root).
 */
function targetOf(platform: Platform, file: string, targetDir: string): string {
  if (platform === 'supabase') return SUPABASE_TARGETS[file as keyof typeof SUPABASE_TARGETS];
  const path = file.replace(/^templates\/[a-z]+\//, '');
  if (platform !== 'next' || path === 'vercel.json') return path;
  const srcLayout = existsSync(join(targetDir, 'src/app')) && !existsSync(join(targetDir, 'app'));
  return srcLayout ? `src/${path}` : path;
}

/** Each file `init` writes for the platform: its path in the package, and in the project. */
export function filesOf(platform: Platform, targetDir = '.'): { from: string; to: string }[] {
  return TEMPLATES[platform].map((from) => ({ from, to: targetOf(platform, from, targetDir) }));
}

interface VercelJson {
  crons?: { path: string; schedule: string }[];
}

/** The Vercel plan `init vercel|next` writes crons for. */
export type VercelPlan = 'hobby' | 'pro';
export const VERCEL_PLANS: readonly VercelPlan[] = ['hobby', 'pro'];

/**
 * Hobby's crons: at most 2, each at most once a day. One worker route serves every queue (the
 * template's /api/worker, SKIPLOCK_QUEUES unset), and maintenance; whatever is nudged runs at once.
 */
export const HOBBY_CRONS = [
  { path: '/api/worker', schedule: '0 6 * * *' },
  { path: '/api/maintenance', schedule: '30 6 * * *' },
] as const;

/** Pro's crons (the template's vercel.json): the two worker routes every minute, maintenance every 10. */
export const PRO_CRONS = [
  { path: '/api/worker', schedule: '* * * * *' },
  { path: '/api/reports-worker', schedule: '* * * * *' },
  { path: '/api/maintenance', schedule: '*/10 * * * *' },
] as const;

/**
 * What keeps a vercel.json's crons from deploying on Hobby: more than 2 crons, or one that fires
 * more than once a day — its minute and hour must each be one number (`30 6 * * *`).
 */
export function hobbyCronProblems(crons: readonly { path: string; schedule: string }[]): string[] {
  const problems = crons.length > 2 ? [`${crons.length} crons: Hobby allows 2`] : [];
  for (const { path, schedule } of crons) {
    const fields = schedule.trim().split(/\s+/);
    const once = fields.length === 5 && /^\d{1,2}$/.test(fields[0] ?? '') && /^\d{1,2}$/.test(fields[1] ?? '');
    if (!once) problems.push(`${path} runs on "${schedule}", more than once a day: Hobby allows daily crons`);
  }
  return problems;
}

/** The template's vercel.json with the plan's crons. */
function forPlan(template: string, plan: VercelPlan): string {
  if (plan === 'pro') return template;
  const config = JSON.parse(template) as VercelJson;
  return `${JSON.stringify({ ...config, crons: HOBBY_CRONS }, null, 2)}\n`;
}

/**
 * Adds the template's crons to an existing vercel.json (those whose path it does not have yet);
 * undefined when the file is not a JSON object, which is then left alone and reported existing.
 */
function mergeCrons(existing: string, template: string): string | undefined {
  let config: unknown;
  try {
    config = JSON.parse(existing);
  } catch {
    return undefined;
  }
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return undefined;
  const crons = (config as VercelJson).crons ?? [];
  if (!Array.isArray(crons)) return undefined;
  const have = new Set(crons.map((cron) => cron?.path));
  const added = ((JSON.parse(template) as VercelJson).crons ?? []).filter((cron) => !have.has(cron.path));
  return `${JSON.stringify({ ...config, crons: [...crons, ...added] }, null, 2)}\n`;
}

/**
 * Writes the platform's files into `targetDir`, refusing (and writing nothing) if any exists — but
 * for Next.js, whose vercel.json is often there already: the crons are added to it.
 */
export function initProject(platform: Platform, targetDir: string, options: { plan?: VercelPlan } = {}): InitResult {
  const root = packageRoot();
  const plan = options.plan ?? 'pro';
  const nextSteps = nextStepsOf(platform);
  const templateOf = (from: string) => {
    const text = readFileSync(join(root, from), 'utf8');
    return from.endsWith('vercel.json') ? forPlan(text, plan) : text;
  };
  const files = filesOf(platform, targetDir);
  const merges = new Map<string, string>();
  const existing: string[] = [];
  for (const { from, to } of files) {
    const target = resolve(targetDir, to);
    if (!existsSync(target)) continue;
    const merged =
      platform === 'next' && to === 'vercel.json'
        ? mergeCrons(readFileSync(target, 'utf8'), templateOf(from))
        : undefined;
    if (merged === undefined) existing.push(to);
    else merges.set(to, merged);
  }
  if (existing.length > 0) return { written: [], existing, merged: [], nextSteps };
  const written: string[] = [];
  for (const { from, to } of files) {
    const target = resolve(targetDir, to);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, merges.get(to) ?? (to === 'vercel.json' ? templateOf(from) : readFileSync(join(root, from))));
    if (!merges.has(to)) written.push(to);
  }
  const result: InitResult = { written, existing: [], merged: [...merges.keys()], nextSteps };
  if (plan === 'hobby' && (platform === 'vercel' || platform === 'next')) {
    const crons = (JSON.parse(readFileSync(resolve(targetDir, 'vercel.json'), 'utf8')) as VercelJson).crons ?? [];
    result.planProblems = hobbyCronProblems(crons);
  }
  return result;
}
