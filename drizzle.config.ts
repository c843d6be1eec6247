// drizzle-kit settings: `bun run db:generate` turns changes in src/db/sqlite/schema.ts into drizzle/*.sql.
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'sqlite',
  schema: './src/db/sqlite/schema.ts',
  out: './drizzle',
});
