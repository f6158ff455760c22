// The schedule_tick phase renders pg-boss's own pass beside skiplock's tick when a run measured it,
// and a record written before it did (the committed bench/RESULTS.json) as before.
import { describe, expect, it } from 'vitest';
import { DOC_BLOCKS, loadResults } from '../../bench/perf-page.js';
import { type ScheduleTickResult, scheduleTickSection } from '../../bench/schedule-tick.js';
import { root } from '../helpers/markdown.js';

const parts: ScheduleTickResult = {
  schedules: 1_000_000,
  due: 1_000,
  tick_ms: 111.5,
  tick_statements: 2,
  occurrences_per_s: 8_969,
  idle_tick_ms: 0.5,
  idle_tick_statements: 1,
  idle_sweep_ms: 1.4,
  idle_sweep_with_probe_ms: 1.5,
  concurrent_ticks_ms: 124.5,
  concurrent_jobs: 1_000,
  pgboss: { rows: 1_000_000, read_all_ms: 4_395.8, evaluate_ms: 59_371 },
};
const whole: ScheduleTickResult = {
  ...parts,
  pgboss: {
    rows: 1_000_000,
    read_all_ms: 4_395.8,
    evaluate_ms: 59_371,
    pass_ms: 65_012,
    pass_due: 1_000,
    forward_ms: 1_834,
    forward_clock_steps: 20,
    forward_poll_s: 5,
  },
};
const ownPass =
  "| pg-boss 12's own pass (one run, driven by its `TestClock` at the due minute): from its start to the 1,000 occurrences in its send-it queue / their forwarding, 20 fetches 5 s apart | 65,012 ms / 1,834 ms of work at most (the clock's settling between steps included), the last occurrence in its queue up to 100 s after the pass in a deployment |";

describe('the schedule_tick section of RESULTS.md', () => {
  it('adds pg-boss’s own pass and its forwarding when the run measured them', () => {
    const md = scheduleTickSection(whole);
    expect(md).toContain(ownPass);
    expect(md).toContain('as many due at the pass (`0 * * * *`, the others at\nminutes 1 to 59)');
    expect(md).toContain('read every row / evaluate every cron | 4,395.8 / 59,371 ms');
  });

  it('renders a run with only the parts as before', () => {
    const md = scheduleTickSection(parts);
    expect(md).toContain('read every row / evaluate every cron | 4,395.8 / 59,371 ms');
    expect(md).not.toContain('own pass');
    expect(md).not.toContain('0 * * * *');
  });
});

describe('the schedule figures of the docs', () => {
  const render = (block: string, tick: ScheduleTickResult) => {
    const results = loadResults(root);
    return DOC_BLOCKS[block]?.render({ ...results, bench: { ...results.bench, schedule_tick: tick } }) ?? '';
  };

  it('docs/schedules.md shows the own pass as a row of its table', () => {
    expect(render('schedule-tick', whole)).toContain(ownPass);
    expect(render('schedule-tick', parts)).not.toContain('own pass');
  });

  it('docs/performance.md says how long pg-boss takes to file and forward the due occurrences', () => {
    expect(render('full-run', whole)).toContain(
      'Its own pass, run once: 65,012 ms to put the 1,000 due jobs on an internal queue, whose worker then moves them to their own queues 50 a fetch, 5 s apart (up to 100 s for all).',
    );
    expect(render('full-run', parts)).not.toContain('Its own pass');
  });
});
