// Pause and resume a queue or a kind from code (docs/operations.md#pause-and-resume).
import { connect } from 'skiplock';

const db = connect({ connectionString: process.env.DATABASE_URL! });

// #region pause
import { pause, pauses, resume } from 'skiplock';

await pause(db, { queue: 'webhooks' }, { by: 'alice', reason: 'partner down' });
await pause(db, { kind: 'deliver-webhook' }, { by: 'alice' });
console.log(await pauses(db)); // [{ scope, name, pausedAt, pausedBy, reason }]
await resume(db, { queue: 'webhooks' });
// #endregion pause
