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
