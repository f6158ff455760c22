// `skiplock init next` (and `init vercel` in a Next.js app), `init cdk`, and the Workers, Deno,
// Supabase and Netlify apps, on folders laid out as users have them. The packed package's own runs
// are test/e2e/next-app.test.ts (`next build`), test/e2e/cdk-app.test.ts (`cdk synth`),
// test/e2e/init-deno.test.ts (Deno), init-cloudflare.test.ts (wrangler, workerd) and
// init-netlify.test.ts (Netlify's own local tooling).
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  filesOf,
  HOBBY_CRONS,
  hobbyCronProblems,
  initProject,
  isNextApp,
  PRO_CRONS,
  TEMPLATES,
} from '../../cli/init.js';
import { runCli } from '../../cli/run.js';

const dirs: string[] = [];
const folder = () => {
  const dir = mkdtempSync(join(tmpdir(), 'skiplock-init-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const cronPaths = (dir: string) =>
  (JSON.parse(readFileSync(join(dir, 'vercel.json'), 'utf8')) as { crons: { path: string; schedule: string }[] }).crons;

/** `skiplock init …` as the CLI runs it; `ask` stands for a terminal's answer. */
async function cli(args: string[], ask?: (question: string) => Promise<string>) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(['init', ...args], {
    env: {},
    out: (line) => out.push(line),
    err: (line) => err.push(line),
    ask: ask ? (question) => ask(question) : undefined,
  });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('skiplock init next: the Vercel plan', () => {
  it('--plan hobby writes 2 daily crons, which pass the Hobby checker, in both the Next.js and the api/ layouts', async () => {
    for (const platform of ['next', 'vercel']) {
      const dir = folder();
      const { code } = await cli([platform, '--dir', dir, '--plan', 'hobby']);
      expect(code).toBe(0);
      expect(cronPaths(dir)).toEqual(HOBBY_CRONS);
      expect(hobbyCronProblems(cronPaths(dir))).toEqual([]);
    }
  });

  it.each(['hobby', 'pro'])(
    '--plan %s: every cron names a route the written app has, which answers GET (what a cron sends)',
    async (plan) => {
      for (const [platform, routeFile] of [
        ['next', (path: string) => `app${path}/route.ts`],
        ['vercel', (path: string) => `${path.slice(1)}.ts`],
      ] as const) {
        const dir = folder();
        expect((await cli([platform, '--dir', dir, '--plan', plan])).code).toBe(0);
        for (const { path } of cronPaths(dir)) {
          const file = join(dir, routeFile(path));
          expect(existsSync(file), `${platform}: ${path}`).toBe(true);
          expect(readFileSync(file, 'utf8'), `${platform}: ${path}`).toMatch(/^export const GET = /m);
        }
      }
    },
  );

  it('--plan pro writes the crons every minute, which Hobby refuses', async () => {
    const dir = folder();
    expect((await cli(['next', '--dir', dir, '--plan', 'pro'])).code).toBe(0);
    expect(cronPaths(dir).map((c) => c.schedule)).toEqual(['* * * * *', '* * * * *', '*/10 * * * *']);
    expect(hobbyCronProblems(cronPaths(dir))).toHaveLength(4); // 3 crons, each more than daily
  });

  it('with no terminal and no --plan: Hobby (it deploys on every plan), and how to switch', async () => {
    const dir = folder();
    const { code, out } = await cli(['next', '--dir', dir]);
    expect(code).toBe(0);
    expect(cronPaths(dir)).toEqual(HOBBY_CRONS);
    expect(out).toMatch(
      /deploy on every plan\. On Pro, run init with --plan pro in a fresh folder, or replace vercel\.json's "crons" with\n\[\{"path":"\/api\/worker","schedule":"\* \* \* \* \*"\}/,
    );
  });

  it('on a terminal it asks which plan', async () => {
    const dir = folder();
    const questions: string[] = [];
    const { code } = await cli(['next', '--dir', dir], async (question) => {
      questions.push(question);
      return 'pro';
    });
    expect(code).toBe(0);
    expect(questions).toHaveLength(1);
    expect(cronPaths(dir)[0]).toEqual({ path: '/api/worker', schedule: '* * * * *' });
  });

  it('a vercel.json whose own crons break Hobby is merged, and the problem said; a bad --plan is a usage error', async () => {
    const dir = folder();
    writeFileSync(
      join(dir, 'vercel.json'),
      JSON.stringify({ crons: [{ path: '/api/digest', schedule: '0 8 * * *' }] }),
    );
    const { code, err } = await cli(['next', '--dir', dir, '--plan', 'hobby']);
    expect(code).toBe(0);
    expect(err).toMatch(/will not deploy on Hobby: 3 crons: Hobby allows 2/);
    expect(err).toMatch(/Remove crons of your own/);
    // Without --plan (no terminal) the same: the problem, never the note that the crons deploy anywhere.
    const other = folder();
    writeFileSync(
      join(other, 'vercel.json'),
      JSON.stringify({ crons: [{ path: '/api/digest', schedule: '0 8 * * *' }] }),
    );
    const unasked = await cli(['next', '--dir', other]);
    expect(unasked.err).toMatch(/will not deploy on Hobby/);
    expect(unasked.out).not.toMatch(/deploy on every plan/);
    expect((await cli(['next', '--dir', folder(), '--plan', 'enterprise'])).code).toBe(2);
  });
});

describe("the Pro crons init names when it writes Hobby's", () => {
  it("are the templates' own vercel.json crons", () => {
    for (const file of ['templates/next/vercel.json', 'vercel.json']) {
      const { crons } = JSON.parse(readFileSync(join(import.meta.dirname, '../..', file), 'utf8')) as {
        crons: unknown;
      };
      expect(crons).toEqual(PRO_CRONS);
    }
  });
});

describe('skiplock init next', () => {
  it('writes the route handlers under app/, the jobs module and the crons, each file as the package ships it', () => {
    const dir = folder();
    const result = initProject('next', dir);
    expect(result.existing).toEqual([]);
    expect(result.written).toContain('app/api/worker/route.ts');
    expect(result.written).toContain('app/admin/[[...path]]/route.ts');
    for (const file of TEMPLATES.next) {
      const target = file.replace('templates/next/', '');
      expect(readFileSync(join(dir, target), 'utf8')).toBe(readFileSync(file, 'utf8'));
    }
    expect(cronPaths(dir).map((c) => c.path)).toEqual(['/api/worker', '/api/reports-worker', '/api/maintenance']);
  });

  it('follows an app kept in src/app; vercel.json stays at the root', () => {
    const dir = folder();
    mkdirSync(join(dir, 'src/app'), { recursive: true });
    const result = initProject('next', dir);
    expect(result.written).toContain('src/app/api/enqueue/route.ts');
    expect(result.written).toContain('src/functions/jobs.ts');
    expect(existsSync(join(dir, 'vercel.json'))).toBe(true);
    expect(existsSync(join(dir, 'app'))).toBe(false);
  });

  it("adds its crons to an existing vercel.json, keeping the file's settings and a cron it already has", () => {
    const dir = folder();
    const own = { regions: ['fra1'], crons: [{ path: '/api/worker', schedule: '*/5 * * * *' }] };
    writeFileSync(join(dir, 'vercel.json'), JSON.stringify(own));
    const result = initProject('next', dir);
    expect(result.merged).toEqual(['vercel.json']);
    expect(result.written).not.toContain('vercel.json');
    const config = JSON.parse(readFileSync(join(dir, 'vercel.json'), 'utf8'));
    expect(config.regions).toEqual(['fra1']);
    expect(cronPaths(dir)).toEqual([
      { path: '/api/worker', schedule: '*/5 * * * *' },
      { path: '/api/reports-worker', schedule: '* * * * *' },
      { path: '/api/maintenance', schedule: '*/10 * * * *' },
    ]);
  });

  it('writes nothing when a route exists or vercel.json is not a JSON object', () => {
    const dir = folder();
    mkdirSync(join(dir, 'app/api/worker'), { recursive: true });
    writeFileSync(join(dir, 'app/api/worker/route.ts'), '// mine');
    writeFileSync(join(dir, 'vercel.json'), '{ not json');
    const result = initProject('next', dir);
    expect(result.existing.sort()).toEqual(['app/api/worker/route.ts', 'vercel.json']);
    expect(result.written).toEqual([]);
    expect(readFileSync(join(dir, 'app/api/worker/route.ts'), 'utf8')).toBe('// mine');
    expect(readFileSync(join(dir, 'vercel.json'), 'utf8')).toBe('{ not json');
    expect(existsSync(join(dir, 'functions'))).toBe(false);
  });

  it('`init vercel` in a folder whose package.json depends on next writes the Next.js routes', async () => {
    const dir = folder();
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ dependencies: { next: '16.4.6', react: '19.3.1' } }));
    expect(isNextApp(dir)).toBe(true);
    const out: string[] = [];
    const code = await runCli(['init', 'vercel', '--dir', dir, '--json'], {
      env: {},
      out: (line) => out.push(line),
      err: (line) => out.push(line),
    });
    expect(code).toBe(0);
    expect(JSON.parse(out.join('\n'))).toMatchObject({ platform: 'next', merged: [] });
    expect(existsSync(join(dir, 'app/api/worker/route.ts'))).toBe(true);
    expect(existsSync(join(dir, 'api'))).toBe(false);

    const plain = folder();
    writeFileSync(join(plain, 'package.json'), JSON.stringify({ dependencies: { hono: '4.0.0' } }));
    expect(isNextApp(plain)).toBe(false);
  });

  it('`init cdk` writes the CDK app at the root beside the Lambda functions', () => {
    const dir = folder();
    const result = initProject('cdk', dir);
    expect(result.written).toEqual(expect.arrayContaining(['cdk.json', 'cdk/app.ts', 'cdk/skiplock-stack.ts']));
    expect(result.written).toContain('functions/worker.ts');
    expect(readFileSync(join(dir, 'cdk/skiplock-stack.ts'), 'utf8')).toBe(
      readFileSync('templates/cdk/cdk/skiplock-stack.ts', 'utf8'),
    );
    expect(existsSync(join(dir, 'templates'))).toBe(false);
  });
});

/** Every file under `dir`, relative to it. */
const filesIn = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();

const EDGE_PLATFORMS = ['cloudflare', 'deno', 'supabase', 'netlify'] as const;

describe('skiplock init cloudflare|deno|supabase|netlify', () => {
  it.each([
    [
      'cloudflare',
      ['functions/jobs.ts', 'src/skiplock.ts', 'src/unused-peers.ts', 'wrangler.jsonc'],
      'npx wrangler deploy',
    ],
    ['deno', ['deno.json', 'functions/jobs.ts', 'main.ts'], 'deno task start'],
    [
      'supabase',
      [
        'supabase/functions/_shared/jobs.ts',
        'supabase/functions/skiplock/deno.json',
        'supabase/functions/skiplock/index.ts',
        'supabase/skiplock-cron.sql',
      ],
      'supabase functions deploy skiplock --no-verify-jwt',
    ],
    [
      'netlify',
      [
        'functions/jobs.ts',
        'netlify.toml',
        'netlify/functions/skiplock-maintenance.ts',
        'netlify/functions/skiplock-worker-background.ts',
        'netlify/functions/skiplock-worker.ts',
        'netlify/functions/skiplock.ts',
      ],
      'npx netlify deploy --build --prod',
    ],
  ] as const)(
    'init %s writes exactly its files, each as the package ships it, and prints the next steps',
    async (platform, expected, deploy) => {
      const dir = folder();
      const { code, out } = await cli([platform, '--dir', dir]);
      expect(code).toBe(0);
      expect(filesIn(dir)).toEqual(expected);
      for (const { from, to } of filesOf(platform)) {
        expect(readFileSync(join(dir, to), 'utf8'), to).toBe(readFileSync(from, 'utf8'));
      }
      expect(out).toMatch(
        new RegExp(
          `^wrote ${filesOf(platform)
            .map((f) => f.to.replaceAll('.', '\\.'))
            .join(', ')} in `,
        ),
      );
      const jobs = filesOf(platform).find((f) => f.from === 'functions/jobs.ts')?.to;
      expect(out).toContain(`npx skiplock migrate`);
      expect(out).toContain(`npx skiplock sync --jobs ${jobs}`);
      expect(out).toContain(deploy);
    },
  );

  it.each(EDGE_PLATFORMS)(
    'init %s refuses to overwrite: one file there already, and nothing is written',
    async (platform) => {
      const dir = folder();
      const taken = filesOf(platform).at(-1)?.to as string;
      mkdirSync(dirname(join(dir, taken)), { recursive: true });
      writeFileSync(join(dir, taken), '// mine');
      const { code, err } = await cli([platform, '--dir', dir]);
      expect(code).toBe(1);
      expect(err).toBe(`refusing to overwrite existing files in ${dir}: ${taken}; nothing was written`);
      expect(filesIn(dir)).toEqual([taken]);
      expect(readFileSync(join(dir, taken), 'utf8')).toBe('// mine');
    },
  );

  it.each(EDGE_PLATFORMS)(
    'init %s: every relative import names a written file, every package import one the app installs (or deno.json maps)',
    (platform) => {
      const dir = folder();
      expect(initProject(platform, dir).written.length).toBe(TEMPLATES[platform].length);
      const denoJson = filesOf(platform).find((f) => f.to.endsWith('deno.json'))?.to;
      const mapped = denoJson
        ? Object.keys((JSON.parse(readFileSync(join(dir, denoJson), 'utf8')) as { imports: object }).imports)
        : undefined;
      const problems: string[] = [];
      for (const { to } of filesOf(platform).filter((f) => f.to.endsWith('.ts'))) {
        for (const [, specifier = ''] of readFileSync(join(dir, to), 'utf8').matchAll(
          /^(?:import|export)\b[^'\n]*from '([^']+)'/gm,
        )) {
          if (specifier.startsWith('.')) {
            const file = join(dirname(join(dir, to)), specifier.replace(/\.js$/, '.ts'));
            if (!existsSync(file)) problems.push(`${to}: ${specifier} is not written`);
          } else if (!/^(skiplock(\/[a-z]+)?|zod\/mini)$/.test(specifier)) {
            problems.push(`${to}: ${specifier} is not a package the app installs`);
          } else if (
            mapped &&
            !mapped.some((key) => key === specifier || (key.endsWith('/') && specifier.startsWith(key)))
          ) {
            problems.push(`${to}: ${specifier} is not in ${denoJson}'s imports`);
          }
        }
      }
      expect(problems).toEqual([]);
    },
  );

  it('an unknown platform is a usage error naming every platform', async () => {
    const { code, err } = await cli(['heroku', '--dir', folder()]);
    expect(code).toBe(2);
    expect(err).toMatch(/^usage: skiplock init lambda\|vercel\|cdk\|next\|cloudflare\|deno\|supabase\|netlify /);
  });
});
