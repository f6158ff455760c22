// Migrating from code: a deploy script or a one-off task.

// #region migrate
import { connect, migrate } from 'skiplock';

const db = connect({ connectionString: process.env.DATABASE_URL!, driver: 'pg' });
await migrate(db); // schema "skiplock"
await migrate(db, { schema: 'jobs' }); // or any lower-case identifier you choose
await db.close();
// #endregion migrate
