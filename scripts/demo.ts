/**
 * `npm run demo`: the whole product on your laptop in under a minute. Migrates, enqueues
 * e-mails, webhooks and reports through the enqueue function, runs worker invocations until
 * the queue is drained (webhooks go to a local receiver that fails ~20% of calls), shows
 * what ended where, then replays the dead-letter queue through the replay function.
 * Uses DATABASE_URL, or an embedded Postgres. `--quiet` prints one JSON line at the end.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createLambdaEnqueue, createLambdaReplay, createLambdaWorker } from '../adapters/lambda.js';
import { resetSharedRuntime } from '../adapters/runtime.js';
import type { KindOutcomes } from '../base/rows.js';
import { stats } from '../core/admin.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { kindOutcomes } from '../db/statements/stats.js';
import { createAppJobs } from '../functions/jobs.js';
import { startDemoReceiver } from './demo-receiver.js';
import { resolveDevDatabase } from './local-postgres.js';

const quiet = process.argv.includes('--quiet');
const say = (line: string) => {
  if (!quiet) process.stdout.write(`${line}\n`);
};
const startedAt = Date.now();
const schema = process.env.SKIPLOCK_SCHEMA ?? 'skiplock_demo';
if (!schema.includes('demo')) {
  console.error(`the demo empties its schema, so its name must contain "demo" (got ${schema})`);
  process.exit(2);
}

const database = await resolveDevDatabase();
const signingSecret = randomBytes(32).toString('hex');
const enqueueToken = randomBytes(24).toString('hex');
const receiver = await startDemoReceiver(signingSecret);
const admin = connect({ connectionString: database.url });
let exitCode = 0;

try {
  say(`skiplock demo — database: ${database.embedded ? 'embedded Postgres' : 'DATABASE_URL'}, schema "${schema}"`);
  await migrate(admin, { schema });
  await admin.db.execute(`truncate "${schema}".jobs` as never);

  // The functions, as they run in Lambda: configured from the environment.
  const env = {
    DATABASE_URL: database.url,
    SKIPLOCK_SCHEMA: schema,
    SKIPLOCK_ENQUEUE_TOKEN: enqueueToken,
    SKIPLOCK_CONCURRENCY: '25',
    SKIPLOCK_BATCH_SIZE: '25',
    SKIPLOCK_SAFETY_MARGIN_MS: '500',
    SKIPLOCK_LEASE_GRACE_MS: '1000',
    SKIPLOCK_LOG_LEVEL: 'error',
  };
  const jobs = createAppJobs({
    emailApiUrl: `${receiver.url}/email`,
    webhookSigningSecret: signingSecret,
    webhookTimeoutMs: 800,
    retryBaseMs: 150,
    reportStepMs: 15,
  });
  const enqueue = createLambdaEnqueue(jobs, { env });
  const worker = createLambdaWorker(jobs, { env });
  const replay = createLambdaReplay(jobs, { env });

  // 1. Enqueue a realistic mix over HTTP (API Gateway events with the bearer token).
  const emails = Array.from({ length: 40 }, (_, i) => {
    const user = i < 35 ? i : i - 35; // five users sign up twice: same idempotency key
    return {
      kind: 'send-email',
      payload: {
        to: `user${user}@example.com`,
        subject: 'Welcome!',
        template: 'welcome',
        idempotencyKey: `welcome-${user}`,
      },
      options: { dedupe: { key: `welcome-${user}` }, correlationId: `signup-${user}` },
    };
  });
  const webhooks = Array.from({ length: 60 }, (_, i) => {
    const path = i % 20 === 7 ? 'gone' : i % 20 === 13 ? 'down' : 'ok';
    return {
      kind: 'deliver-webhook',
      payload: {
        url: `${receiver.url}/hooks/${path}`,
        event: 'order.paid',
        deliveryId: `dlv-${i}`,
        data: { orderId: 1000 + i },
      },
    };
  });
  const reports = Array.from({ length: 5 }, (_, i) => ({
    kind: 'build-report',
    payload: { reportId: `r-${i}`, sections: 12 },
  }));
  let enqueued = 0;
  let deduplicated = 0;
  for (const batch of [emails, webhooks, reports]) {
    const response = (await enqueue(httpEvent(JSON.stringify({ jobs: batch }), enqueueToken))) as {
      statusCode: number;
      body: string;
    };
    if (response.statusCode !== 200) throw new Error(`enqueue answered ${response.statusCode}: ${response.body}`);
    for (const r of (JSON.parse(response.body) as { results: { outcome: string }[] }).results) {
      if (r.outcome === 'deduplicated') deduplicated++;
      else enqueued++;
    }
  }
  say(`enqueued ${enqueued} jobs through the enqueue function (${deduplicated} duplicate e-mails deduplicated)`);

  // 2. Worker invocations, as the scheduler would start them, until nothing is left to run.
  const drain = async (label: string) => {
    let invocations = 0;
    while (Date.now() - startedAt < 50_000) {
      invocations++;
      // A 60 s Lambda's budget: every kind's timeout (reports: 30 s) fits in it.
      const summary = (await worker(
        { 'detail-type': 'Scheduled Event', source: 'aws.events' },
        lambdaContext(45_000),
      )) as unknown as Record<string, number>;
      const depth = (await stats(admin, { schema })).reduce(
        (acc, row) => ({
          waiting: acc.waiting + row.ready + row.scheduled + row.retryWaiting,
          running: acc.running + row.running,
          completed: acc.completed + row.completedLastHour,
          dead: acc.dead + row.dead,
        }),
        { waiting: 0, running: 0, completed: 0, dead: 0 },
      );
      if ((summary.claimed ?? 0) > 0 || (summary.dead ?? 0) > 0)
        say(
          `  ${label} invocation ${String(invocations).padStart(2)}: claimed ${pad(summary.claimed)} completed ${pad(summary.completed)} retried ${pad(summary.retried)} dead ${pad(summary.dead)}  │ waiting ${pad(depth.waiting)} running ${pad(depth.running)} completed ${pad(depth.completed)} dead ${pad(depth.dead)}`,
        );
      if (depth.waiting === 0 && depth.running === 0) return invocations;
      // Retries are waiting for their backoff: the next scheduled tick would pick them up.
      if (summary.claimed === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('the demo did not drain within 50 s');
  };
  say('running worker invocations:');
  const invocations = await drain('worker');
  const before = await kindOutcomes(admin.executor, schema);
  say('');
  printTable(before);

  // 3. The receiver's owner fixes their endpoints; replay the DLQ through the replay function.
  receiver.becomeHealthy();
  const replayed = (await replay({ all: true, limit: 1000, by: 'demo' }, lambdaContext(10_000))) as {
    status: number;
    replayed: unknown[];
  };
  say(`\nreplayed ${replayed.replayed.length} dead jobs through the replay function; running the worker again:`);
  const replayInvocations = await drain('replay');
  const after = await kindOutcomes(admin.executor, schema);
  say('');
  printTable(after);

  const totals = (rows: KindOutcomes[], key: 'completed' | 'dead' | 'total' | 'failedAttempts') =>
    rows.reduce((n, r) => n + r[key], 0);
  const result = {
    enqueued,
    deduplicated,
    invocations: invocations + replayInvocations,
    beforeReplay: {
      completed: totals(before, 'completed'),
      dead: totals(before, 'dead'),
      failedAttempts: totals(before, 'failedAttempts'),
      deadReasons: mergeReasons(before),
    },
    replayed: replayed.replayed.length,
    afterReplay: { completed: totals(after, 'completed'), dead: totals(after, 'dead'), total: totals(after, 'total') },
    emailsSent: receiver.emailsSent.size,
    webhooksAccepted: receiver.webhooksAccepted.size,
    badSignatures: receiver.stats().badSignatures,
    durationMs: Date.now() - startedAt,
  };
  const allDone = result.afterReplay.completed === enqueued && result.afterReplay.total === enqueued;
  if (!allDone) exitCode = 1;
  if (quiet) process.stdout.write(`${JSON.stringify(result)}\n`);
  else
    say(
      `\n${allDone ? '✔' : '✘'} ${result.afterReplay.completed}/${enqueued} jobs completed in ${(result.durationMs / 1000).toFixed(1)} s; ${result.emailsSent} distinct e-mails sent, ${result.webhooksAccepted} webhooks accepted with valid signatures.`,
    );
} catch (err) {
  console.error(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
  exitCode = 1;
} finally {
  await resetSharedRuntime();
  await admin.close();
  await receiver.close();
  await database.stop();
}
process.exit(exitCode);

function httpEvent(body: string, token: string) {
  return {
    version: '2.0',
    routeKey: 'POST /jobs',
    rawPath: '/jobs',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    requestContext: { http: { method: 'POST', path: '/jobs' }, requestId: randomUUID() },
    body,
    isBase64Encoded: false,
  };
}

function lambdaContext(remainingMs: number) {
  const deadline = Date.now() + remainingMs;
  return { getRemainingTimeInMillis: () => deadline - Date.now(), awsRequestId: randomUUID(), functionName: 'demo' };
}

function pad(n: number | undefined) {
  return String(n ?? 0).padStart(3);
}

function mergeReasons(rows: KindOutcomes[]) {
  const reasons: Record<string, number> = {};
  for (const row of rows)
    for (const [reason, n] of Object.entries(row.deadReasons)) reasons[reason] = (reasons[reason] ?? 0) + n;
  return reasons;
}

function printTable(rows: KindOutcomes[]) {
  say('  kind              completed  failed attempts  dead  (reasons)');
  for (const r of rows) {
    const reasons = Object.entries(r.deadReasons)
      .map(([reason, n]) => `${reason}: ${n}`)
      .join(', ');
    say(
      `  ${r.kind.padEnd(16)}  ${pad(r.completed).padStart(9)}  ${pad(r.failedAttempts).padStart(15)}  ${pad(r.dead)}  ${reasons}`,
    );
  }
}
