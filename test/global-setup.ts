import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { startNeonHttpEndpoint } from '../testing/neon-http-endpoint.js';
import { startNeonWsProxy } from '../testing/neon-ws-proxy.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    neonWsProxyPort: number;
    neonHttpUrl: string;
    /** Where test/helpers/packed.ts packs the package once for the run. */
    packDir: string;
  }
}

type Services = {
  databaseUrl: string;
  neonWsProxyPort: number;
  neonHttpUrl: string;
  packDir: string;
  stop(): Promise<void>;
};

// One database and one pair of Neon stand-ins for the whole run, whichever project asks
// first. Vitest may load this module once per project, so the state lives on globalThis.
const shared = globalThis as typeof globalThis & {
  __skiplockTestServices?: { services: Promise<Services>; users: number };
};

async function startServices() {
  const database = await resolveTestDatabase();
  const proxy = await startNeonWsProxy();
  const http = await startNeonHttpEndpoint();
  const packDir = mkdtempSync(join(tmpdir(), 'skiplock-pack-'));
  return {
    databaseUrl: database.url,
    neonWsProxyPort: proxy.port,
    neonHttpUrl: http.url,
    packDir,
    stop: async () => {
      rmSync(packDir, { recursive: true, force: true });
      await proxy.close();
      await http.close();
      await database.stop();
    },
  };
}

export default async function setup(project: TestProject) {
  shared.__skiplockTestServices ??= { services: startServices(), users: 0 };
  const state = shared.__skiplockTestServices;
  state.users++;
  const s = await state.services;
  project.provide('databaseUrl', s.databaseUrl);
  project.provide('neonWsProxyPort', s.neonWsProxyPort);
  project.provide('neonHttpUrl', s.neonHttpUrl);
  project.provide('packDir', s.packDir);
  return async () => {
    state.users--;
    if (state.users === 0) {
      shared.__skiplockTestServices = undefined;
      await s.stop();
    }
  };
}
