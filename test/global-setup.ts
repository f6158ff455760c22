import type { TestProject } from 'vitest/node';
import { startNeonHttpEndpoint } from './helpers/neon-http-endpoint.js';
import { startNeonWsProxy } from './helpers/neon-ws-proxy.js';
import { resolveTestDatabase } from './helpers/postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    neonWsProxyPort: number;
    neonHttpUrl: string;
  }
}

// One database and one pair of Neon stand-ins for the whole run, whichever project asks first.
let services:
  | Promise<{ databaseUrl: string; neonWsProxyPort: number; neonHttpUrl: string; stop(): Promise<void> }>
  | undefined;
let users = 0;

async function startServices() {
  const database = await resolveTestDatabase();
  const proxy = await startNeonWsProxy();
  const http = await startNeonHttpEndpoint();
  return {
    databaseUrl: database.url,
    neonWsProxyPort: proxy.port,
    neonHttpUrl: http.url,
    stop: async () => {
      await proxy.close();
      await http.close();
      await database.stop();
    },
  };
}

export default async function setup(project: TestProject) {
  services ??= startServices();
  users++;
  const s = await services;
  project.provide('databaseUrl', s.databaseUrl);
  project.provide('neonWsProxyPort', s.neonWsProxyPort);
  project.provide('neonHttpUrl', s.neonHttpUrl);
  return async () => {
    users--;
    if (users === 0) await s.stop();
  };
}
