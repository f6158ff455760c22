// A Bun server serving skiplock (docs/deploy-bun.md). Bun's global, as far as this example uses it
// (`npm install -D @types/bun` gives the whole of it).
declare const Bun: {
  serve(options: {
    port: number;
    idleTimeout: number;
    fetch(request: Request, server: { requestIP(request: Request): { address: string } | null }): Promise<Response>;
  }): unknown;
};

// #region bun-server
import { createDenoApp } from 'skiplock/deno';
import { jobs, schedules } from './functions/jobs.js';

// Every skiplock route (the worker, enqueue, replay, control, signal, maintenance, the console at /admin).
const skiplock = createDenoApp(jobs, { schedules, env: process.env });

Bun.serve({
  port: Number(process.env.PORT ?? 3000),
  // Bun closes a request after 10 s idle by default; the worker route answers when its run ends.
  idleTimeout: 120,
  fetch: (request, server) => skiplock.fetch(request, { client: server.requestIP(request)?.address }),
});

// The worker each minute and maintenance every 10, in this process. Remove these two timers if an
// external scheduler requests /skiplock/worker and /skiplock/maintenance with CRON_SECRET instead.
setInterval(async () => void (await skiplock.tick('worker')).body?.cancel(), 60_000);
setInterval(async () => void (await skiplock.tick('maintenance')).body?.cancel(), 600_000);
// #endregion bun-server
