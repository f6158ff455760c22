import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const run = promisify(execFile);

it('the README quickstart (npm run example) runs on an embedded Postgres and completes its job', async () => {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  const { stdout } = await run('npx', ['tsx', 'examples/quickstart.ts'], {
    env,
    timeout: 60_000,
  });
  expect(stdout).toMatch(/enqueued \{ id: '1', outcome: 'inserted' \}/);
  const summary = stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line))
    .find((entry) => entry.msg === 'invocation');
  expect(summary).toMatchObject({ claimed: 1, completed: 1, stoppedBecause: 'drained' });
  expect(stdout).toMatch(/job 1 is now completed/);
});

it('the flow example (npm run example:flow) runs each step after its parents, cancels after a failure, and a replay brings the rest back', async () => {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  const { stdout } = await run('npx', ['tsx', 'examples/flow.ts'], { env, timeout: 60_000 });
  expect(stdout).toMatch(/^report \{ rows: 1300, title: 'daily' \}$/m);
  expect(stdout).toMatch(/^after the failure: cancelled dependency_failed$/m);
  expect(stdout).toMatch(/^after the replay: \{ rows: 500, title: 'flaky' \}$/m);
});

it('the steps example (npm run example:steps) sleeps, waits for a signal, retries a step without running the others again, and takes an approval link once', async () => {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  const { stdout } = await run('npx', ['tsx', 'examples/steps.ts'], { env, timeout: 60_000 });
  // The three-day sleep: the job is back in the queue, no attempt used, run_at three days away.
  expect(stdout).toMatch(/^ada: asleep for 3\.00 days: queued, attempt 0, run_at \S+$/m);
  expect(stdout).toMatch(/^bo: slept 50 ms, now waiting for "activated:bo" until \S+: queued, attempt 0$/m);
  expect(stdout).toMatch(/^cy: slept 50 ms, now waiting for "activated:cy" until \S+: queued, attempt 0$/m);
  // The signal woke the waiting job, which resumed after its wait; the other one timed out.
  expect(stdout).toMatch(/^signal activated:bo → woke 1 waiting job$/m);
  expect(stdout).toMatch(/^bo: completed, activated on the pro plan \(attempt 1\)$/m);
  expect(stdout).toMatch(/^cy: completed, no signal within 500 ms, so a reminder \(attempt 1\)$/m);
  const mails = stdout
    .split('\n')
    .filter((line) => line.startsWith('  mail → '))
    .map((line) => line.replace(/token=\S+$/, 'token=…'));
  expect(mails.sort()).toEqual(
    [
      '  mail → ada: Welcome aboard',
      '  mail → bo: Welcome aboard',
      '  mail → bo: Tips for the pro plan',
      '  mail → cy: Welcome aboard',
      '  mail → cy: Need a hand getting started?',
      '  mail → finance@example.com: The 2026-10 report is ready (#1)',
      '  mail → manager@example.com: Approve order A-17: https://app.example.com/api/signal?token=…',
    ].sort(),
  );
  // The approval link: the signal route took the token once and refused it the second time.
  expect(stdout).toMatch(
    /^POST https:\/\/app\.example\.com\/api\/signal\?token=\S+ → 200 \{"signal":\{"id":"\d+","woken":1,"queues":\["default"\]\}\}$/m,
  );
  expect(stdout).toMatch(/^the same link again → 409 signal_token_used$/m);
  expect(stdout).toMatch(/^approval: completed, order A-17 approved \(attempt 1\)$/m);
  // The build step failed once and ran again; collect did not, and the report was stored once.
  expect(stdout).toMatch(/^ {2}build: the renderer crashed; the step will run again on its own attempts$/m);
  expect(stdout).toMatch(/^report: completed, report #1 in report-2026-10\.csv \(attempt 1\)$/m);
  expect(stdout).toMatch(/^calls: collect 1, build 2, notify 1; rows stored: 1$/m);
  expect(stdout).toMatch(
    /^its steps: collect completed \(1 attempt\), build completed \(2 attempts\), store completed \(1 attempt\), notify completed \(1 attempt\)$/m,
  );
});

it('the events example (npm run example:events) fans one publish out to each subscriber once, filters, maps, flags and replays', async () => {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  const { stdout } = await run('npx', ['tsx', 'examples/events.ts'], { env, timeout: 60_000 });
  expect(stdout).toMatch(/^published 1 send-receipt,ship-express$/m);
  expect(stdout).toMatch(/^retried: duplicate true jobs 0$/m);
  expect(stdout).toMatch(/^order\.refunded subscribers 0$/m);
  expect(stdout).toMatch(/^replayed 2 then 0$/m);
  expect(stdout).toMatch(/^ {2}send-receipt: job \d+ completed$/m);
  expect(stdout).toMatch(/^ {2}ship-express: job \d+ completed$/m);
  expect(stdout).toMatch(/^ {2}update-loyalty: job \d+ completed$/m);
  const lines = stdout.split('\n');
  // A-18 is not express: one express shipping, a receipt for each order, mapped.
  expect(lines.filter((l) => l.startsWith('express shipping'))).toEqual(['express shipping for A-17']);
  expect(lines.filter((l) => l.startsWith('receipt → '))).toEqual([
    'receipt → ada@example.com: Your order A-17',
    'receipt → ada@example.com: Your order A-18',
  ]);
});

it('the batches example (npm run example:batches) sends in calls of up to five, and writes each job its own outcome', async () => {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  const { stdout } = await run('npx', ['tsx', 'examples/batches.ts'], { env, timeout: 60_000 });
  expect(stdout).toMatch(/^calls to the mail API: 5 \+ 2 messages$/m);
  expect(stdout).toMatch(/^summary: claimed 7, completed 5, retried 1, dead 1$/m);
  expect(stdout).toMatch(/^ada@example\.com: completed \(\{"messageId":"msg-1-0"\}\)$/m);
  expect(stdout).toMatch(/^busy-cy@example\.com: queued \(retried: throttled by the mail API\)$/m);
  expect(stdout).toMatch(/^eve@nowhere\.invalid: dead \(bounced: no such domain\)$/m);
  expect(stdout).toMatch(/^gus@example\.com: completed \(\{"messageId":"msg-2-1"\}\)$/m);
});
