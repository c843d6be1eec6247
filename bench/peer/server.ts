// The peer keygate is measured against: better-auth's api-key plugin, as a TypeScript user would set it
// up instead of keygate, served by Elysia on bun:sqlite in WAL mode with synchronous FULL (keygate's
// durability). POST /create makes a key for a user; POST /verify checks one. Usage:
//   bun bench/peer/server.ts <port> <database file>     (prints "listening <url>" once ready)
import { Database } from 'bun:sqlite';
import { apiKey } from '@better-auth/api-key';
import { betterAuth } from 'better-auth';
import { getMigrations } from 'better-auth/db/migration';
import { Elysia } from 'elysia';

const port = Number(process.argv[2] ?? 0);
const file = process.argv[3] ?? ':memory:';

const db = new Database(file, { create: true });
db.run('PRAGMA journal_mode = WAL');
db.run('PRAGMA synchronous = FULL');

const auth = betterAuth({
  database: db,
  secret: 'peer-benchmark-secret-at-least-32-characters',
  baseURL: `http://127.0.0.1:${port}`,
  logger: { disabled: true },
  rateLimit: { enabled: false },
  // keygate has no per-key rate limit or usage count either: off, so both do the same job.
  plugins: [apiKey({ rateLimit: { enabled: false } })],
});
const { runMigrations } = await getMigrations(auth.options);
await runMigrations();

// Keys belong to users; a few users exist up front, as in keygate's benchmark.
const now = Date.now();
const insertUser = db.prepare(
  'INSERT OR IGNORE INTO user (id, name, email, emailVerified, createdAt, updatedAt) VALUES (?, ?, ?, 0, ?, ?)',
);
for (let i = 1; i <= 1000; i++) insertUser.run(String(i), `user ${i}`, `u${i}@example.test`, now, now);

type CreateBody = { userId: string; name: string; expiresIn: number };
type VerifyBody = { key: string };

new Elysia()
  .post('/create', async ({ body, set }) => {
    const { userId, name, expiresIn } = body as CreateBody;
    const created = await auth.api.createApiKey({ body: { userId, name, expiresIn } });
    set.status = 201;
    return { result: 'success', apikey: { key: created.key, id: created.id } };
  })
  .post('/verify', async ({ body }) => {
    const result = await auth.api.verifyApiKey({ body: { key: (body as VerifyBody).key } });
    return { result: 'success', valid: result.valid };
  })
  .listen({ hostname: '127.0.0.1', port }, (server) => console.log(`listening ${server.url}`));
