// For apps that carry skiplock's tables in their own drizzle-kit migration history.

// #region schema-export
// drizzle/schema.ts in your app: every skiplock table, in the schema "skiplock"
export * from 'skiplock/schema';
// #endregion schema-export
