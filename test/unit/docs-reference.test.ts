// Reference pages that stay true (STYLE 19): each table or list of names in the docs is compared
// with the code it describes, so a name added, renamed or dropped in one place fails here.
import { describe, expect, it } from 'vitest';
import type {
  createLambdaMaintenance,
  LambdaEnqueueOptions,
  LambdaSignalOptions,
  LambdaWorkerOptions,
} from '../../adapters/lambda.js';
import type {
  createVercelMaintenance,
  VercelEnqueueOptions,
  VercelSignalOptions,
  VercelWorkerOptions,
} from '../../adapters/vercel.js';
import type {
  BatchOptions,
  ConnectOptions,
  ExplainOptions,
  MaintenanceOptions,
  SkiplockDb,
  StepError,
  signWebhook,
  verifyWebhook,
} from '../../core/index.js';
import * as skiplock from '../../core/index.js';
import { paragraphsOf, parseMarkdown, read, tableAfter } from '../helpers/markdown.js';

/** Every key of T, named once: a missing or unknown key is a type error (`npm run typecheck`). */
const keysOf =
  <T>() =>
  (names: Record<keyof Required<T>, true>): string[] =>
    Object.keys(names);

/** The part of a page under `heading`, up to the next heading of its level or above. */
function section(page: string, heading: string): string {
  const lines = read(page).split('\n');
  const at = lines.findIndex((line) => line.replace(/^#+\s+/, '') === heading && line.startsWith('#'));
  if (at < 0) throw new Error(`${page} has no heading "${heading}"`);
  const level = /^#+/.exec(lines[at] as string)?.[0].length ?? 1;
  const end = lines.findIndex(
    (line, i) => i > at && /^#+\s/.test(line) && (/^#+/.exec(line)?.[0].length ?? 7) <= level,
  );
  return lines.slice(at, end < 0 ? undefined : end).join('\n');
}

/** The identifiers a part of a page shows in inline code: `close()`, `{ jobs, now }`, `schema`. */
const codeNames = (text: string) =>
  new Set(
    [
      ...parseMarkdown(text)
        .prose.join('\n')
        .matchAll(/`([^`]+)`/g),
    ].flatMap((m) => (m[1] as string).match(/[A-Za-z_]\w*/g) ?? []),
  );

describe('options and results the docs list', () => {
  const cases = [
    {
      what: 'explain(db, id, options)',
      page: 'docs/operations.md',
      heading: "Why isn't my job running?",
      names: keysOf<ExplainOptions>()({ schema: true, jobs: true, now: true }),
    },
    {
      what: 'signWebhook(input)',
      page: 'docs/webhooks.md',
      heading: 'Signing without sending',
      names: keysOf<Parameters<typeof signWebhook>[0]>()({ id: true, timestamp: true, body: true, secrets: true }),
    },
    {
      what: 'verifyWebhook(input)',
      page: 'docs/webhooks.md',
      heading: 'Receiving',
      names: keysOf<Parameters<typeof verifyWebhook>[0]>()({
        headers: true,
        body: true,
        secrets: true,
        toleranceSeconds: true,
        now: true,
      }),
    },
    {
      what: 'connect(options)',
      page: 'docs/configuration.md',
      heading: 'connect(options)',
      names: keysOf<ConnectOptions>()({
        connectionString: true,
        driver: true,
        max: true,
        statementTimeoutMs: true,
        queryTimeoutMs: true,
        connectionTimeoutMs: true,
        idleTimeoutMs: true,
        jit: true,
        preparedStatements: true,
        neon: true,
      }),
    },
    {
      what: 'what connect() returns (a SkiplockDb)',
      page: 'docs/configuration.md',
      heading: 'connect(options)',
      names: keysOf<SkiplockDb>()({
        driver: true,
        executor: true,
        db: true,
        interactiveTransactions: true,
        drizzleTransaction: true,
        close: true,
      }),
    },
    {
      what: 'defineBatchJob({ batch })',
      page: 'docs/configuration.md',
      heading: 'defineBatchJob(options)',
      names: keysOf<BatchOptions>()({ size: true, maxWaitMs: true }),
    },
    {
      what: 'runMaintenance(db, options)',
      page: 'docs/configuration.md',
      heading: 'runMaintenance(db, options)',
      names: keysOf<MaintenanceOptions>()({
        schema: true,
        completedRetentionMs: true,
        deadRetentionMs: true,
        pruneBatchSize: true,
        maxDurationMs: true,
        rollupRetentionMs: true,
        signalRetentionMs: true,
        eventRetentionMs: true,
        eventReconcileMarginMs: true,
        clock: true,
        metrics: true,
      }),
    },
  ];
  it.each(cases)('$page names every key of $what', ({ page, heading, names }) => {
    const shown = codeNames(section(page, heading));
    expect(names.filter((name) => !shown.has(name))).toEqual([]);
  });
});

describe("the adapters' options configuration.md lists", () => {
  /** The row of configuration.md's adapter table whose first cell names `factory(`. */
  const rowOf = (factory: string) => {
    const rows = tableAfter(read('docs/configuration.md'), /^\| function \| options \(default\) \|/);
    const row = rows.find(([name]) => new RegExp(`\`${factory}\\(`).test(name ?? ''));
    if (!row) throw new Error(`configuration.md's adapter table has no row for ${factory}`);
    return row[1] ?? '';
  };
  const cases = [
    {
      factory: 'createLambdaWorker',
      names: keysOf<LambdaWorkerOptions>()({
        env: true,
        queues: true,
        slowQueues: true,
        kinds: true,
        clock: true,
        invocationMs: true,
        fanOut: true,
        schedules: true,
        tracing: true,
        metrics: true,
        drizzle: true,
        test: true,
      }),
    },
    {
      factory: 'createVercelWorker',
      names: keysOf<VercelWorkerOptions>()({
        env: true,
        maxDurationMs: true,
        queues: true,
        slowQueues: true,
        kinds: true,
        clock: true,
        name: true,
        fanOut: true,
        schedules: true,
        tracing: true,
        metrics: true,
        drizzle: true,
        waitUntil: true,
        idleHints: true,
        test: true,
      }),
    },
    {
      factory: 'createLambdaEnqueue',
      names: keysOf<LambdaEnqueueOptions>()({ env: true, nudger: true, clock: true, tracing: true }),
    },
    {
      factory: 'createVercelEnqueue',
      names: keysOf<VercelEnqueueOptions>()({
        env: true,
        nudger: true,
        clock: true,
        tracing: true,
        waitUntil: true,
        idleHints: true,
      }),
    },
    { factory: 'createLambdaSignal', names: keysOf<LambdaSignalOptions>()({ env: true, nudger: true, clock: true }) },
    {
      factory: 'createVercelSignal',
      names: keysOf<VercelSignalOptions>()({ env: true, nudger: true, clock: true, waitUntil: true, idleHints: true }),
    },
    {
      factory: 'createLambdaMaintenance',
      names: keysOf<NonNullable<Parameters<typeof createLambdaMaintenance>[0]>>()({
        env: true,
        metrics: true,
        test: true,
      }),
    },
    {
      factory: 'createVercelMaintenance',
      names: keysOf<NonNullable<Parameters<typeof createVercelMaintenance>[0]>>()({
        env: true,
        maxDurationMs: true,
        metrics: true,
        idleHints: true,
        test: true,
      }),
    },
  ];
  it.each(cases)(
    'the row of $factory names every key of its options (waitUntil wherever it is taken)',
    ({ factory, names }) => {
      const shown = codeNames(rowOf(factory));
      expect(names.filter((name) => !shown.has(name))).toEqual([]);
    },
  );
});

describe('the DLQ reasons and error codes the docs list', () => {
  it("steps.md's DLQ reasons are StepError's reasons and invalid_result", () => {
    type StepReason = ConstructorParameters<typeof StepError>[0];
    const reasons = keysOf<Record<StepReason, true>>()({
      step_failed: true,
      step_order_changed: true,
      step_name_reused: true,
      too_many_steps: true,
      step_too_long: true,
      invalid_step: true,
      step_unsupported: true,
    });
    const rows = tableAfter(read('docs/steps.md'), /^\| Reason \| Why \|/);
    expect(rows.map(([reason]) => reason?.replaceAll('`', '')).sort()).toEqual([...reasons, 'invalid_result'].sort());
  });

  it("steps.md's step_unsupported names each way a step is refused: neon-http, no `drizzle`, a transactional kind", () => {
    const [, why = ''] =
      tableAfter(read('docs/steps.md'), /^\| Reason \| Why \|/).find(([r]) => r === '`step_unsupported`') ?? [];
    expect(why).toMatch(/neon-http/);
    expect(why).toMatch(/`drizzle`/);
    expect(why).toMatch(/`transactional: true`/);
  });

  it("kinds-and-enqueue.md's error table gives each class the code it has", () => {
    const rows = tableAfter(read('docs/kinds-and-enqueue.md'), /^\| error \| `code` \| when \|/);
    expect(rows.length).toBeGreaterThan(0);
    const errors = skiplock as unknown as Record<string, new (...args: unknown[]) => { code: string }>;
    const actual = rows.map(([name = '']) => {
      const Class = errors[name.replaceAll('`', '')];
      // Every constructor takes strings, an array and numbers for the message: these build one.
      return [name, Class ? `\`${new Class('x', [], 1).code}\`` : 'not exported by skiplock'];
    });
    expect(actual).toEqual(rows.map(([name, code]) => [name, code]));
  });
});

describe('optional peers', () => {
  it('every page that says a Vercel feature needs `@vercel/functions` says what a Next.js app passes instead', () => {
    const problems: string[] = [];
    for (const page of ['README.md', 'docs/configuration.md', 'docs/deploy-vercel.md', 'docs/kinds-and-enqueue.md']) {
      for (const { line, text } of paragraphsOf(read(page))) {
        if (/needs? `@vercel\/functions`/.test(text) && !/`after`/.test(text)) problems.push(`${page}:${line}`);
      }
    }
    expect(problems).toEqual([]);
  });
});
