// Figures in the docs come from the tools (SPEC §11): each has one source, and a test compares the
// pages with it, so a figure changed in one place fails here instead of drifting. Bundle sizes come
// from docs/bundle-sizes.md, which `npm run bundle-report -- --write` writes and this file rebuilds;
// the install commands from `installCommands()`, which `skiplock init` prints; the number of tables
// from skiplock/schema (test/e2e/drizzle-path.test.ts counts what drizzle-kit generates).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { is } from 'drizzle-orm';
import { PgTable } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import { costTables } from '../../bench/cost-model.js';
import { type IdleResults, idleDayTable } from '../../bench/idle/table.js';
import type { ServerlessReport } from '../../bench/serverless/report.js';
import { filesOf, installCommands, nextStepsOf, TEMPLATES } from '../../cli/init.js';
import {
  BUNDLE_REPORT_WRITE,
  BUNDLE_SIZES_PAGE,
  BUNDLE_TOLERANCE_BYTES,
  BUNDLED_DRIVERS,
  BUNDLED_FUNCTIONS,
  type BundledDriver,
  type BundledFunction,
  kib,
  measureBundles,
  parseBundleSizes,
  renderBundleSizes,
} from '../../scripts/bundle-figures.js';
import { offlineCdkSynth, pages, paragraphsOf, parseMarkdown, read, root } from '../helpers/markdown.js';

/** `[298 KiB](bundle-sizes.md "worker, pg")`: a quoted bundle size. */
const QUOTE = /\[(\d+) KiB\]\(([^)\s]*bundle-sizes\.md)\s+"([a-z-]+), ([a-z-]+)"\)/g;
/** A size in prose, e.g. `298 KiB`, `1.13 MiB`. */
const SIZE = /(\d+(?:[.,]\d+)?)\s?(KiB|KB|MiB|MB)\b/g;

describe('bundle sizes in the docs', () => {
  const recorded = () => {
    if (!existsSync(join(root, BUNDLE_SIZES_PAGE)))
      throw new Error(`no ${BUNDLE_SIZES_PAGE}: run ${BUNDLE_REPORT_WRITE}`);
    return parseBundleSizes(read(BUNDLE_SIZES_PAGE));
  };

  it(`${BUNDLE_SIZES_PAGE} is the page ${BUNDLE_REPORT_WRITE} writes, unedited`, () => {
    const record = recorded();
    expect(read(BUNDLE_SIZES_PAGE)).toBe(renderBundleSizes(record));
    expect(record.date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });

  it(`${BUNDLE_SIZES_PAGE} holds today's sizes: every bundle rebuilt is within ${BUNDLE_TOLERANCE_BYTES / 1024} KiB of its figure`, async () => {
    const record = recorded();
    const today = await measureBundles();
    const off: string[] = [];
    for (const fn of BUNDLED_FUNCTIONS) {
      for (const driver of BUNDLED_DRIVERS) {
        const [recorded, now] = [record.bytes[fn]?.[driver], today[fn][driver]];
        if (recorded === undefined || Math.abs(recorded - now) > BUNDLE_TOLERANCE_BYTES) {
          off.push(`${fn} ${driver}: ${recorded ?? 'missing'} bytes recorded, ${now} today`);
        }
      }
    }
    expect(off, `run ${BUNDLE_REPORT_WRITE} and commit ${BUNDLE_SIZES_PAGE}`).toEqual([]);
  }, 180_000);

  it(`every page that quotes a bundle size quotes ${BUNDLE_SIZES_PAGE}'s figure, as a link to it`, () => {
    const record = recorded();
    const problems: string[] = [];
    let quotes = 0;
    for (const page of pages.filter((p) => p !== BUNDLE_SIZES_PAGE)) {
      for (const { line, text } of paragraphsOf(read(page))) {
        const prose = text.replace(/`[^`]*`/g, '');
        for (const [, figure, , fn, driver] of prose.matchAll(QUOTE)) {
          quotes++;
          const bytes = record.bytes[fn as BundledFunction]?.[driver as BundledDriver];
          if (bytes === undefined)
            problems.push(`${page}:${line}: no bundle "${fn}, ${driver}" in ${BUNDLE_SIZES_PAGE}`);
          else if (Number(figure) !== kib(bytes))
            problems.push(
              `${page}:${line}: ${fn} (${driver}) is quoted as ${figure} KiB; ${BUNDLE_SIZES_PAGE}: ${kib(bytes)} KiB`,
            );
        }
        // A function's bundle size written out by hand: 100 KiB and more, where the text is about bundles.
        if (!/bundl/i.test(prose)) continue;
        for (const [size, number, unit] of prose.replace(QUOTE, '').matchAll(SIZE)) {
          const asKib = Number((number as string).replace(',', '.')) * (unit?.startsWith('M') ? 1024 : 1);
          if (asKib >= 100) problems.push(`${page}:${line}: "${size}" — quote ${BUNDLE_SIZES_PAGE} as a link instead`);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(quotes).toBeGreaterThanOrEqual(4); // deploy-lambda.md's worker, console.md's console and control
  });
});

describe('the install commands', () => {
  const installBlock = () => {
    const readme = read('README.md');
    const section = readme.slice(readme.indexOf('## Install into your app'));
    const block = parseMarkdown(section).blocks.find((b) => b.lang === 'sh');
    return (block?.text ?? []).map((line) => line.replace(/\s+#.*$/, '').trimEnd());
  };

  it("the README's install block is what `skiplock init` prints, for every platform", () => {
    const commands = installCommands();
    expect(installBlock().slice(0, commands.length)).toEqual(commands);
    for (const platform of Object.keys(TEMPLATES) as (keyof typeof TEMPLATES)[]) {
      const nextSteps = nextStepsOf(platform);
      for (const command of commands) expect(nextSteps, platform).toContain(command);
      expect(nextSteps).not.toMatch(/npm install skiplock\b/);
    }
  });

  it("every tarball name in the docs is this version's", async () => {
    const { version } = (await import('../../package.json', { with: { type: 'json' } })).default;
    const names = pages.flatMap((page) =>
      [...read(page).matchAll(/skiplock-(\d+\.\d+\.\d+[^\s/]*?)\.tgz/g)].map((m) => m[1]),
    );
    expect(names.length).toBeGreaterThan(0);
    expect(new Set(names)).toEqual(new Set([version]));
  });
});

describe('the number of tables', () => {
  it('every "skiplock\'s N tables" in the docs is the number of tables skiplock/schema exports', async () => {
    const schema: Record<string, unknown> = await import('../../db/schema.js');
    const tables = Object.values(schema).filter((value) => is(value, PgTable)).length;
    const quoted = pages.flatMap((page) =>
      [...read(page).matchAll(/skiplock['’]s (\d+) tables/g)].map((m) => `${page}: ${m[1]}`),
    );
    expect(quoted.length).toBeGreaterThan(0);
    expect(quoted).toEqual(quoted.map((q) => q.replace(/\d+$/, String(tables))));
  });
});

describe('the files `skiplock init` writes', () => {
  it.each([
    ['lambda', 'docs/deploy-lambda.md'],
    ['vercel', 'docs/deploy-vercel.md'],
    ['cloudflare', 'docs/deploy-cloudflare.md'],
    ['deno', 'docs/deploy-deno.md'],
    ['supabase', 'docs/deploy-deno.md'],
    ['netlify', 'docs/deploy-netlify.md'],
  ] as const)('every file `init %s` writes is named in %s, at its place in the project', (platform, page) => {
    const named = new Set([...read(page).matchAll(/`([\w./-]+\.(?:ts|json|jsonc|yml|toml|sql))`/g)].map((m) => m[1]));
    expect(filesOf(platform).filter(({ to }) => !named.has(to))).toEqual([]);
  });
});

describe('cdk synth offline', () => {
  it('deploy-lambda.md names the settings `cdk synth` runs offline with (test/e2e/cdk-app.test.ts runs exactly those)', () => {
    // Without them the CLI reaches for the network — notices, telemetry, its version check, the EC2
    // instance metadata for a region — and waits on each before it gives up.
    expect(offlineCdkSynth(read('docs/deploy-lambda.md'))).toEqual({
      env: {
        CDK_DISABLE_CLI_TELEMETRY: 'true',
        CDK_DISABLE_VERSION_CHECK: '1',
        AWS_EC2_METADATA_DISABLED: 'true',
      },
      flags: ['--no-notices'],
    });
  });
});

describe("docs/cost.md's simulated idle day", () => {
  it('is the table bench/RESULTS.idle.json makes (npm run bench:idle -- --write)', () => {
    const results = JSON.parse(read('bench/RESULTS.idle.json')) as IdleResults;
    const page = read('docs/cost.md');
    const block = /<!-- idle-day: bench\/RESULTS\.idle\.json -->\n([\s\S]*?)\n<!-- \/idle-day -->/.exec(page)?.[1];
    expect(block).toBe(idleDayTable(results));
    // The targets the table shows: no statement in an hour with nothing due, every job on time but the
    // one written with raw SQL, which the recheck finds within 6 hours.
    for (const hours of [results.idle_day.lambda, results.idle_day.vercel]) {
      for (const hour of hours) if (hour.due.length === 0) expect(hour.statements).toBe(0);
    }
    for (const job of [...results.jobs.lambda, ...results.jobs.vercel]) {
      expect(job.lateMs).not.toBeNull();
      expect(job.lateMs as number).toBeLessThanOrEqual(job.name === 'raw-insert' ? 6 * 3_600_000 : 60_000);
    }
  });
});

describe("docs/cost.md's tables per day, per month and against the peers", () => {
  it('are what bench/cost-model.ts makes from its inputs, bench/RESULTS.idle.json and bench/RESULTS.serverless.json', () => {
    const results = JSON.parse(read('bench/RESULTS.idle.json')) as IdleResults;
    const serverless = JSON.parse(read('bench/RESULTS.serverless.json')) as ServerlessReport;
    const page = read('docs/cost.md');
    const block = (name: string) =>
      new RegExp(`<!-- ${name}: bench/cost-model\\.ts -->\\n([\\s\\S]*?)\\n<!-- /${name} -->`).exec(page)?.[1];
    const { days, peers } = costTables(results, serverless);
    expect(block('cost-model')).toBe(days);
    expect(block('cost-peers')).toBe(peers);
  });
});
