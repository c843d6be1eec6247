// The verify floor: the least a verify (and a forward-auth check) can do on the framework keygate is
// built on. A bare Elysia app, served like the ceiling, holding every key of the database in a Map
// (no cache expiry, no store, no request id, no log line, no security headers): parse and check the
// body, find the key, hash the secret, compare in constant time, check the expiry, answer. keygate's
// verify ÷ this floor is what keygate's own layers cost; this floor ÷ the ceiling is what the work costs.
// With `duties`, the floor also does what keygate owes every answer (bench/duties.ts: the request
// line with its request id, Cache-Control, the README's headers) and reads the verify body as
// keygate does (Content-Type checked, strict UTF-8), and forward-auth's credential as keygate reads
// it, its minLevel and the five identity headers of a forward-auth answer. That is the least a verify or
// forward-auth answer can cost here while keeping those promises. With `bare` too, the same answers
// come from a bare `Bun.serve` (the route found by method and path, as keygate's edge finds verify's
// and forward-auth's), with no Elysia in between. With `rules` too, verify reads its body under
// keygate's body rules as keygate does, with keygate's own functions: the body (charset, chunked, nesting),
// the credential's forms and properties, minLevel, and the key id's and the secret's format.
//   taskset -c 0 bun bench/verify-floor.ts <port> <keygate database file> [duties [bare [rules]]]
import { Database } from 'bun:sqlite';
import { timingSafeEqual } from 'node:crypto';
import { Elysia, t } from 'elysia';
import { isWellFormedSecret, KEY_ID_PATTERN } from '../src/apikeys/secrets';
import { readBearer, readKeyAndSecret } from '../src/auth/credentials';
import { readJsonBody } from '../src/http/body';
import { queryOf } from '../src/http/edge';
import { requiredLevel } from '../src/verification/forward-auth';
import { credentialOf } from '../src/verification/verify';
import { answered, jsonBody, requestId } from './duties';

const port = Number(process.argv[2] ?? 3902);
const file = process.argv[3];
const duties = process.argv[4] === 'duties';
const bare = duties && process.argv[5] === 'bare';
const rules = bare && process.argv[6] === 'rules';
if (file === undefined)
  throw new Error('usage: bun bench/verify-floor.ts <port> <keygate database file> [duties [bare [rules]]]');

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

/** A verify answer with keygate's duties: its body read as keygate reads one. */
async function verifyWithDuties(request: Request): Promise<Response> {
  const started = performance.now();
  const id = requestId(request);
  const body = (await jsonBody(request)) as { key?: unknown; secret?: unknown } | undefined;
  if (body === undefined) {
    return answered(request, id, started, 400, {
      result: 'error',
      error: 'The Content-Type must be application/json.',
    });
  }
  if (typeof body.key !== 'string' || typeof body.secret !== 'string') {
    return answered(request, id, started, 400, {
      result: 'error',
      error: 'key and secret go together: send both.',
    });
  }
  return answered(request, id, started, 200, { result: 'success', ...check(body.key, body.secret) });
}

/** The same, its body read under keygate's body rules by keygate's own functions (key form only). */
async function verifyWithRules(request: Request): Promise<Response> {
  const started = performance.now();
  const id = requestId(request);
  let credential: ReturnType<typeof credentialOf>;
  try {
    credential = credentialOf(await readJsonBody(request));
  } catch (error) {
    return answered(request, id, started, 400, { result: 'error', error: (error as Error).message });
  }
  if (!('key' in credential)) {
    return answered(request, id, started, 400, { result: 'error', error: 'The floor checks keys only.' });
  }
  const { key, secret, minLevel } = credential;
  const wellFormed = isWellFormedSecret(secret) && KEY_ID_PATTERN.test(key);
  const verdict = wellFormed ? check(key, secret) : REFUSED;
  const body =
    verdict.valid && verdict.principal.level < minLevel
      ? { result: 'success', valid: false, code: 'INSUFFICIENT_LEVEL', principal: verdict.principal }
      : { result: 'success', ...verdict };
  return answered(request, id, started, 200, body);
}

/** A forward-auth answer with keygate's duties and the five identity headers it carries. */
function forwardAuthWithDuties(request: Request): Response {
  const started = performance.now();
  const id = requestId(request);
  // The credential read as keygate reads it (a key and its secret, when no Bearer token is given),
  // minLevel from the query (keygate's own readers; the bench sends no query), and all five identity
  // headers.
  const verdict = strictKeyVerdict(request);
  if (!verdict.valid || verdict.principal.level < requiredLevel(queryOf(request.url), null)) {
    return answered(request, id, started, 403, {
      result: 'error',
      error: 'The API key or secret is not valid.',
    });
  }
  const { principal } = verdict;
  return answered(
    request,
    id,
    started,
    200,
    { result: 'success', principal },
    {
      'x-keygate-user-id': String(principal.userId),
      'x-keygate-level': String(principal.level),
      'x-keygate-auth': principal.type,
      'x-keygate-key': principal.key,
      'x-keygate-expires-at': principal.expiresAt,
    },
  );
}

if (bare) {
  Bun.serve({
    hostname: '127.0.0.1',
    port,
    development: false,
    fetch(request) {
      const url = request.url;
      const pathStart = url.indexOf('/', url.indexOf('//') + 2);
      const queryStart = url.indexOf('?', pathStart);
      const path = queryStart === -1 ? url.slice(pathStart) : url.slice(pathStart, queryStart);
      if (request.method === 'POST' && path === '/apikeys/verify')
        return rules ? verifyWithRules(request) : verifyWithDuties(request);
      if (request.method === 'GET' && path === '/forward-auth') return forwardAuthWithDuties(request);
      return new Response(null, { status: path === '/health' ? 200 : 404 });
    },
  });
} else {
  const app = new Elysia({ normalize: false });
  if (duties) {
    app
      .post('/apikeys/verify', ({ request }) => verifyWithDuties(request), { parse: 'none' })
      .get('/forward-auth', ({ request }) => forwardAuthWithDuties(request));
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
}
console.log(
  `verify floor${duties ? " with keygate's duties" : ''}${rules ? " and keygate's body rules" : ''}${bare ? ' on a bare Bun.serve' : ''} (${keys.size} keys) on 127.0.0.1:${port}`,
);

const REFUSED = { valid: false, code: 'NOT_FOUND' } as const;

/** The credential read by keygate's own readers (a Bearer token would go another way). */
function strictKeyVerdict({ headers }: Request) {
  const credential = readBearer(headers).kind === 'absent' ? readKeyAndSecret(headers) : undefined;
  return credential?.kind === 'key' ? check(credential.key, credential.secret) : REFUSED;
}

function basicVerdict(request: Request) {
  const basic = request.headers.get('authorization') ?? '';
  const decoded = Buffer.from(basic.slice(6), 'base64').toString();
  const colon = decoded.indexOf(':');
  return check(decoded.slice(0, colon), decoded.slice(colon + 1));
}
