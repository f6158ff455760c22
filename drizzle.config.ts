import { defineConfig } from 'drizzle-kit';

// Generates skiplock's own migrations from db/schema.ts into db/migrations.
// The migrator (db/migrate.ts) keeps its journal inside the skiplock schema, so these
// never mix with the application's own drizzle migrations.
export default defineConfig({
  dialect: 'postgresql',
  schema: './db/schema.ts',
  out: './db/migrations',
  schemaFilter: ['skiplock'],
  dbCredentials: { url: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test' },
});
