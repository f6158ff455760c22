/**
 * The one place the docs take bundle sizes from: docs/bundle-sizes.md, written whole by
 * `npm run bundle-report -- --write` from the bytes of each function's bundle. Other pages quote a
 * figure as a link to it, `[N KiB](bundle-sizes.md "worker, pg")`, and
 * test/unit/docs-figures.test.ts rebuilds the bundles and compares: the page with the build, and
 * every quote with the page.
 */
import { version as esbuildVersion } from 'esbuild';
import { bundleFunction } from './bundle.js';

export const BUNDLED_FUNCTIONS = [
  'worker',
  'enqueue',
  'replay',
  'control',
  'signal',
  'console',
  'maintenance',
] as const;
export const BUNDLED_DRIVERS = ['pg', 'neon-ws', 'neon-http'] as const;
export type BundledFunction = (typeof BUNDLED_FUNCTIONS)[number];
export type BundledDriver = (typeof BUNDLED_DRIVERS)[number];

export const BUNDLE_SIZES_PAGE = 'docs/bundle-sizes.md';
export const BUNDLE_REPORT_WRITE = 'npm run bundle-report -- --write';
/**
 * How far a recorded size may be from today's build before the page must be written again: a
 * small change leaves the figures standing, a dependency or a feature that moves them does not.
 */
export const BUNDLE_TOLERANCE_BYTES = 3 * 1024;

export type BundleBytes = Record<BundledFunction, Record<BundledDriver, number>>;

export interface BundleRecord {
  /** YYYY-MM-DD (UTC) of the measurement. */
  date: string;
  esbuild: string;
  bytes: BundleBytes;
}

/** Each function bundled once per driver, as serverless.yml and the CDK app bundle it. */
export async function measureBundles(): Promise<BundleBytes> {
  const entries = BUNDLED_FUNCTIONS.flatMap((fn) => BUNDLED_DRIVERS.map((driver) => ({ fn, driver })));
  const sizes = await Promise.all(entries.map(({ fn, driver }) => bundleFunction(fn, driver)));
  const bytes = {} as BundleBytes;
  entries.forEach(({ fn, driver }, i) => {
    bytes[fn] ??= {} as Record<BundledDriver, number>;
    bytes[fn][driver] = (sizes[i] as Uint8Array).byteLength;
  });
  return bytes;
}

export function recordOf(bytes: BundleBytes, date = new Date()): BundleRecord {
  return { date: date.toISOString().slice(0, 10), esbuild: esbuildVersion, bytes };
}

/** Bytes as the docs show them: whole KiB. */
export const kib = (bytes: number): number => Math.round(bytes / 1024);

const DATA = /^<!-- bundle-bytes (\{.*\}) -->$/m;

/** docs/bundle-sizes.md for a measurement: the table people read, and the bytes the test reads. */
export function renderBundleSizes(record: BundleRecord): string {
  const rows = BUNDLED_FUNCTIONS.map(
    (fn) => `| \`${fn}\` | ${BUNDLED_DRIVERS.map((driver) => `${kib(record.bytes[fn][driver])} KiB`).join(' | ')} |`,
  );
  return [
    '# Bundle sizes',
    '',
    `<!-- Written by \`${BUNDLE_REPORT_WRITE}\`: do not edit. test/unit/docs-figures.test.ts rebuilds the`,
    `bundles and fails when a figure here is more than ${BUNDLE_TOLERANCE_BYTES / 1024} KiB off, or when a page quotes another. -->`,
    '',
    'Each deployable function as serverless.yml and the CDK app bundle it: esbuild, minified ESM for',
    'Node 22 with the `createRequire` banner, `@aws-sdk/*` external, only the configured driver',
    '([deploy-lambda.md](deploy-lambda.md#secrets-iam-and-bundles)). Measured on',
    `${record.date} with esbuild ${record.esbuild} by \`${BUNDLE_REPORT_WRITE}\` (without \`--write\` it`,
    'prints them, with the worker’s cold import); `serverless package` and `cdk synth` give the same',
    `sizes within ${BUNDLE_TOLERANCE_BYTES / 1024} KiB (test/e2e/serverless-package.test.ts, test/e2e/cdk-app.test.ts).`,
    '',
    `| function | ${BUNDLED_DRIVERS.join(' | ')} |`,
    `| --- | ${BUNDLED_DRIVERS.map(() => '---:').join(' | ')} |`,
    ...rows,
    '',
    'A page quotes one of these as a link here: `[N KiB](bundle-sizes.md "worker, pg")`.',
    '',
    `<!-- bundle-bytes ${JSON.stringify(record)} -->`,
    '',
  ].join('\n');
}

/** The measurement docs/bundle-sizes.md was written from. */
export function parseBundleSizes(page: string): BundleRecord {
  const data = DATA.exec(page);
  if (!data) throw new Error(`${BUNDLE_SIZES_PAGE} has no <!-- bundle-bytes … --> line: run ${BUNDLE_REPORT_WRITE}`);
  return JSON.parse(data[1] as string) as BundleRecord;
}
