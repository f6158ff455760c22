import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

/**
 * With PROBE_PROF=<file>, starts a V8 CPU profile (sampled every 100 µs) of what the probe runs next;
 * the returned function stops it and writes it to the file. Without it, both do nothing.
 */
export async function startCpuProfile(): Promise<() => Promise<void>> {
  const file = process.env.PROBE_PROF;
  if (!file) return async () => {};
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  return async () => {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(file, JSON.stringify(profile));
  };
}
