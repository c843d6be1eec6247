// The verify floor: the least a verify (and a forward-auth check) can do on the framework keygate is
// built on. A bare Elysia app, served like the ceiling, holding every key of the database in a Map
// (no cache expiry, no store, no request id, no log line, no security headers): parse and check the
// body, find the key, hash the secret, compare in constant time, check the expiry, answer. keygate's
// verify ÷ this floor is what keygate's own layers cost; this floor ÷ the ceiling is what the work costs.
// With `duties`, the floor also does what keygate owes every answer: the request's JSON log line with
// its request id (the contract, §6; the client's id or a UUID), Cache-Control: no-store (§7, §8),
// the headers the README promises (X-Request-Id, X-Content-Type-Options, Keep-Alive), and a verify
// body read as bytes, its Content-Type checked and decoded as strict UTF-8. That is the least a
// verify or forward-auth answer can cost here while keeping those promises.
//   taskset -c 0 bun bench/verify-floor.ts <port> <keygate database file> [duties]
import { Database } from 'bun:sqlite';
import { timingSafeEqual } from 'node:crypto';
import { Elysia, t } from 'elysia';

const port = Number(process.argv[2] ?? 3902);
const file = process.argv[3];
const duties = process.argv[4] === 'duties';
if (file === undefined)
  throw new Error('usage: bun bench/verify-floor.ts <port> <keygate database file> [duties]');

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

const utf8 = new TextDecoder('utf-8', { fatal: true });
const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;
let logLines = '';
let flushScheduled = false;

const app = new Elysia({ normalize: false });
if (duties) {
  app
    .post(
      '/apikeys/verify',
      async ({ request }) => {
        const started = performance.now();
        const id = requestId(request);
        if (!/^application\/json[ \t]*(;|$)/i.test(request.headers.get('content-type') ?? '')) {
          return answered(request, id, started, 400, {
            result: 'error',
            error: 'The Content-Type must be application/json.',
          });
        }
        const body = JSON.parse(utf8.decode(await request.bytes()));
        if (typeof body.key !== 'string' || typeof body.secret !== 'string') {
          return answered(request, id, started, 400, {
            result: 'error',
            error: 'key and secret go together: send both.',
          });
        }
        return answered(request, id, started, 200, { result: 'success', ...check(body.key, body.secret) });
      },
      { parse: 'none' },
    )
    .get('/forward-auth', ({ request }) => {
      const started = performance.now();
      const id = requestId(request);
      const verdict = basicVerdict(request);
      if (!verdict.valid) {
        return answered(request, id, started, 403, {
          result: 'error',
          error: 'The API key or secret is not valid.',
        });
      }
      return answered(
        request,
        id,
        started,
        200,
        { result: 'success', principal: verdict.principal },
        {
          'x-keygate-user-id': String(verdict.principal.userId),
          'x-keygate-level': String(verdict.principal.level),
        },
      );
    });
} else {
  app
    .post('/apikeys/verify', ({ body }) => ({ result: 'success', ...check(body.key, body.secret) }), {
      body: t.Object({ key: t.String(), secret: t.String() }, { additionalProperties: false }),
    })
    .get('/forward-auth', ({ request, set }) => {
      const verdict = basicVerdict(request);
      if (!verdict.valid) {
        set.status = 403;
        return { result: 'error', error: 'The API key or secret is not valid.' };
      }
      set.headers['x-keygate-user-id'] = String(verdict.principal.userId);
      set.headers['x-keygate-level'] = String(verdict.principal.level);
      return { result: 'success', principal: verdict.principal };
    });
}
app.get('/health', () => {}).listen({ hostname: '127.0.0.1', port });
console.log(`verify floor${duties ? " with keygate's duties" : ''} (${keys.size} keys) on 127.0.0.1:${port}`);

function basicVerdict(request: Request) {
  const basic = request.headers.get('authorization') ?? '';
  const decoded = Buffer.from(basic.slice(6), 'base64').toString();
  const colon = decoded.indexOf(':');
  return check(decoded.slice(0, colon), decoded.slice(colon + 1));
}

function requestId(request: Request): string {
  const given = request.headers.get('x-request-id');
  return given !== null && REQUEST_ID.test(given) ? given : crypto.randomUUID();
}

/** The answer with the contract's headers, and its log line (buffered, written once per turn). */
function answered(
  request: Request,
  id: string,
  started: number,
  status: number,
  body: unknown,
  extra: Record<string, string> = {},
): Response {
  const response = new Response(JSON.stringify(body), {
    status,
    headers: {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      'x-request-id': id,
      'x-content-type-options': 'nosniff',
      'keep-alive': 'timeout=5',
      ...extra,
    },
  });
  const url = request.url;
  const pathStart = url.indexOf('/', url.indexOf('//') + 2);
  const ms = performance.now() - started;
  logLines += `{"time":"${new Date().toISOString()}","level":"info","msg":"request","requestId":"${id}","method":"${request.method}","path":${JSON.stringify(url.slice(pathStart))},"status":${status},"ms":${Math.round(ms * 100) / 100}}\n`;
  if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(() => {
      flushScheduled = false;
      process.stdout.write(logLines);
      logLines = '';
    });
  }
  return response;
}
