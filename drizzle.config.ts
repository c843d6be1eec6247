// drizzle-kit settings: `bun run db:generate` turns changes in src/db/schema.ts into drizzle/*.sql.
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'sqlite',
  schema: './src/db/schema.ts',
  out: './drizzle',
});
