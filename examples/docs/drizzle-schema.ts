// For apps that carry skiplock's table in their own drizzle-kit migration history.

// #region schema-export
// drizzle/schema.ts in your app
export { completedCounts, jobs, skiplockSchema } from 'skiplock/schema';
// #endregion schema-export
