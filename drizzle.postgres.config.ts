// drizzle-kit settings for PostgreSQL: `bun run db:generate` turns changes in src/db/postgres/schema.ts
// into drizzle/postgres/*.sql (generate needs no database connection).
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/postgres/schema.ts',
  out: './drizzle/postgres',
});
