// Another schema or payload limit, and enqueue by kind name (HTTP or CLI input).
import { drizzle } from 'drizzle-orm/node-postgres';
import { jobs } from './jobs.js';

const db = drizzle(process.env.DATABASE_URL!);
declare const body: { kind: string; payload: unknown };

// #region enqueue-by-kind
import { createEnqueuer, enqueueByKind, JobRegistry } from 'skiplock';

const registry = new JobRegistry(jobs);
await enqueueByKind(db, registry, body.kind, body.payload); // UnknownKindError for a kind not in the registry

// The same functions bound to another schema or payload limit:
const tenantQueue = createEnqueuer({ schema: 'jobs', maxPayloadBytes: 64 * 1024 });
await tenantQueue.enqueueByKind(db, registry, body.kind, body.payload);
// #endregion enqueue-by-kind
