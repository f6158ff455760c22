import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * `skiplock init lambda|vercel`: the deployable app of this repository, copied into a user's
 * project. The package ships these very files (package.json "files"), so what `init` writes is
 * what this repository packages and tests in CI.
 */
export const TEMPLATES = {
  lambda: [
    'serverless.yml',
    'functions/jobs.ts',
    'functions/worker.ts',
    'functions/enqueue.ts',
    'functions/replay.ts',
    'functions/control.ts',
    'functions/signal.ts',
    'functions/console.ts',
    'functions/maintenance.ts',
  ],
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
} as const;

export type Platform = keyof typeof TEMPLATES;

const NEXT_STEPS: Record<Platform, string> = {
  lambda: `next steps:
  1. npm install skiplock zod drizzle-orm
     npm install -D serverless@3 serverless-esbuild esbuild
  2. replace the example kinds in functions/jobs.ts with your own (every function imports them);
     every kind's queue must be one a worker in serverless.yml serves (SKIPLOCK_QUEUES: emails,webhooks
     and reports here) — a kind without \`queue\` is on 'default', which none of them serves;
     \`skiplock stats\` flags ready jobs no worker serves
  3. store the database URL in Secrets Manager:
     aws secretsmanager create-secret --name skiplock/database --secret-string 'postgres://…'
  4. DATABASE_URL=postgres://… npx skiplock migrate
  5. npx serverless package        # builds the bundles offline, no AWS credentials needed
     npx serverless deploy --param="databaseSecretArn=arn:aws:secretsmanager:…" --param="enqueueToken=$(openssl rand -hex 24)"`,
  vercel: `next steps:
  1. npm install skiplock zod drizzle-orm
  2. replace the example kinds in functions/jobs.ts with your own (every route imports them);
     every kind's queue must be one a worker route serves (api/worker.ts: SKIPLOCK_QUEUES, every queue
     when unset; api/reports-worker.ts: reports); \`skiplock stats\` flags ready jobs no worker serves
  3. set the project's variables: DATABASE_URL, SKIPLOCK_DRIVER (neon-http or neon-ws for Neon),
     CRON_SECRET, SKIPLOCK_ENQUEUE_TOKEN and SKIPLOCK_ADMIN_TOKEN (16+ characters each), e.g. vercel env add CRON_SECRET
  4. DATABASE_URL=postgres://… npx skiplock migrate
  5. vercel deploy`,
};

export interface InitResult {
  written: string[];
  /** Files that already exist: nothing was written. */
  existing: string[];
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

/** Writes the platform's files into `targetDir`, refusing (and writing nothing) if any exists. */
export function initProject(platform: Platform, targetDir: string): InitResult {
  const root = packageRoot();
  const files = TEMPLATES[platform];
  const existing = files.filter((file) => existsSync(resolve(targetDir, file)));
  if (existing.length > 0) return { written: [], existing, nextSteps: NEXT_STEPS[platform] };
  for (const file of files) {
    const target = resolve(targetDir, file);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, readFileSync(join(root, file)));
  }
  return { written: [...files], existing: [], nextSteps: NEXT_STEPS[platform] };
}
