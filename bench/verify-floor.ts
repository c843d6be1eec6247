// The verify floor: the least a verify (and a forward-auth check) can do on the framework keygate is
// built on. A bare Elysia app, served like the ceiling, holding every key of the database in a Map
// (no cache expiry, no store, no request id, no log line, no security headers): parse and check the
// body, find the key, hash the secret, compare in constant time, check the expiry, answer. keygate's
// verify ÷ this floor is what keygate's own layers cost; this floor ÷ the ceiling is what the work costs.
//   taskset -c 0 bun bench/verify-floor.ts <port> <keygate database file>
import { Database } from 'bun:sqlite';
import { timingSafeEqual } from 'node:crypto';
import { Elysia, t } from 'elysia';

const port = Number(process.argv[2] ?? 3902);
const file = process.argv[3];
if (file === undefined) throw new Error('usage: bun bench/verify-floor.ts <port> <keygate database file>');

type Key = { hash: Uint8Array; userId: number; level: number; name: string; expiresAt: number };
const keys = new Map<string, Key>();
const db = new Database(file, { readonly: true });
for (const row of db
  .query('SELECT id, secret_hash, user_id, level, name, expires_at FROM api_keys')
  .all() as Array<{
  id: string;
  secret_hash: Uint8Array;
  user_id: number;
  level: number;
  name: string;
  expires_at: number;
}>) {
  keys.set(row.id, {
    hash: row.secret_hash,
    userId: row.user_id,
    level: row.level,
    name: row.name,
    expiresAt: row.expires_at,
  });
}
db.close();

const candidate = new Uint8Array(32);
const noKey: Key = { hash: new Uint8Array(32), userId: 0, level: 0, name: '', expiresAt: 0 };

/** The same checks as keygate's, in the same order: lookup, hash, constant-time compare, expiry. */
function check(id: string, secret: string) {
  const key = keys.get(id);
  Bun.SHA256.hash(secret, candidate);
  const matches = timingSafeEqual(candidate, (key ?? noKey).hash);
  if (key === undefined || !matches) return { valid: false, code: 'NOT_FOUND' } as const;
  if (key.expiresAt <= Date.now()) return { valid: false, code: 'EXPIRED' } as const;
  const principal = {
    type: 'key',
    key: id,
    userId: key.userId,
    level: key.level,
    name: key.name,
    expiresAt: new Date(key.expiresAt).toISOString(),
  };
  return { valid: true, code: 'VALID', principal } as const;
}

new Elysia({ normalize: false })
  .post('/apikeys/verify', ({ body }) => ({ result: 'success', ...check(body.key, body.secret) }), {
    body: t.Object({ key: t.String(), secret: t.String() }, { additionalProperties: false }),
  })
  .get('/forward-auth', ({ request, set }) => {
    const basic = request.headers.get('authorization') ?? '';
    const decoded = Buffer.from(basic.slice(6), 'base64').toString();
    const colon = decoded.indexOf(':');
    const verdict = check(decoded.slice(0, colon), decoded.slice(colon + 1));
    if (!verdict.valid) {
      set.status = 403;
      return { result: 'error', message: 'The API key or secret is not valid.' };
    }
    set.headers['x-keygate-user-id'] = String(verdict.principal.userId);
    set.headers['x-keygate-level'] = String(verdict.principal.level);
    return { result: 'success', principal: verdict.principal };
  })
  .get('/health', () => {})
  .listen({ hostname: '127.0.0.1', port });
console.log(`verify floor (${keys.size} keys) on 127.0.0.1:${port}`);
