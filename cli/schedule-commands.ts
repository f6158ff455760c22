// Schedule commands: list the recurring schedules, tick them by hand.

import { listSchedules, runSchedules } from '../core/schedules.js';
import type { CommandContext } from './commands.js';
import { when } from './flow-commands.js';
import { table } from './format.js';
import { EXIT, UsageError } from './io.js';

export const SCHEDULE_COMMANDS: Record<string, (ctx: CommandContext) => Promise<number>> = {
  async schedules({ conn, schema, emit, schedules }) {
    const rows = await listSchedules(conn, { schema, defined: schedules });
    emit(
      rows.length === 0
        ? `no schedules recorded${schedules ? ' or defined' : ' (pass --jobs to list the ones the module defines)'}`
        : table(
            rows.map((s) => ({
              schedule: s.name,
              cron: s.cron,
              'time zone': s.timezone,
              kind: s.kind,
              last: s.lastOccurrence ? when(s.lastOccurrence) : 'not recorded yet',
              next: when(s.nextOccurrence),
              'last job': s.lastJobId ?? '',
              source: s.source,
            })),
            ['schedule', 'cron', 'time zone', 'kind', 'last', 'next', 'last job', 'source'],
          ),
      rows,
    );
    return EXIT.ok;
  },
  async 'schedules tick'({ conn, schema, emit, schedules, rest }) {
    if (rest.length > 0) throw new UsageError('schedules tick takes no arguments');
    if (!schedules || schedules.length === 0) {
      throw new UsageError('needs --jobs with a module that exports `schedules`');
    }
    const result = await runSchedules(conn, schedules, { schema });
    const lines = [
      ...result.enqueued.map(
        (e) => `enqueued ${e.schedule} @ ${e.occurrence.toISOString()} as job ${e.jobId ?? '(held by a live job)'}`,
      ),
      ...result.skipped.map((s) => `skipped ${s.count} missed occurrence(s) of ${s.schedule}`),
      ...result.failed.map((f) => `failed ${f.schedule}: ${f.error}`),
    ];
    emit(lines.length === 0 ? 'nothing was due' : lines.join('\n'), result);
    return result.failed.length > 0 ? EXIT.refused : EXIT.ok;
  },
};

export const SCHEDULE_SUBCOMMANDS = ['schedules'];
