// A replica while its PostgreSQL is stopped at once (a crash, a pulled cable): every route that needs
// the database answers 503 with Retry-After in the error shape, never 500; a key it has cached keeps
// verifying; its log stays JSON, line by line on stdout and stderr, with no 500 and no query or
// parameters; and once the database is back every route answers as before, with no restart.
// Runs in `bun run test:postgres`; plain `bun test` (SQLite) skips it.
import { afterAll, describe, expect, it } from 'bun:test';
import { startPostgres, TEST_ENGINE, type ThrowawayPostgres } from '../support/postgres';
import { bearerFor, operatorBearer, type Replica, startReplica, within } from '../support/replicas';

type Key = { key: string; secret: string };
/** The keys the routes act on, made before the outage; `cached` is the only one the replica has read. */
type Keys = Record<
  'cached' | 'uncached' | 'get' | 'deleteJwt' | 'deleteKey' | 'rotateJwt' | 'rotateKey' | 'deleteAdmin',
  Key
>;
type Credentials = 'jwt' | 'key' | 'admin' | 'none';

/**
 * One route: how to call it, and what it answers once the database is back. A new route joins with
 * one line here, e.g. `['PATCH /apikeys/:id/jwt', 'PATCH', (k) => `/apikeys/${k.get.key}/jwt`, 'jwt', {…}, 200]`.
 */
type RouteCase = [
  name: string,
  method: string,
  path: (keys: Keys) => string,
  credentials: Credentials,
  body: ((keys: Keys) => unknown) | undefined,
  upStatus: number,
];

const USER = 731_904;
const createBody = { name: 'outage', level: 3, expiresIn: 3600 };

const ROUTES: RouteCase[] = [
  ['POST /apikeys/jwt', 'POST', () => '/apikeys/jwt', 'jwt', () => createBody, 201],
  ['POST /apikeys/key', 'POST', () => '/apikeys/key', 'key', () => createBody, 201],
  ['GET /apikeys/jwt', 'GET', () => '/apikeys/jwt', 'jwt', undefined, 200],
  ['GET /apikeys/key', 'GET', () => '/apikeys/key', 'key', undefined, 200],
  ['GET /apikeys/:id/jwt', 'GET', (k) => `/apikeys/${k.get.key}/jwt`, 'jwt', undefined, 200],
  ['GET /apikeys/:id/key', 'GET', (k) => `/apikeys/${k.get.key}/key`, 'key', undefined, 200],
  ['DELETE /apikeys/:id/jwt', 'DELETE', (k) => `/apikeys/${k.deleteJwt.key}/jwt`, 'jwt', undefined, 204],
  ['DELETE /apikeys/:id/key', 'DELETE', (k) => `/apikeys/${k.deleteKey.key}/key`, 'key', undefined, 204],
  [
    'POST /apikeys/:id/rotate/jwt',
    'POST',
    (k) => `/apikeys/${k.rotateJwt.key}/rotate/jwt`,
    'jwt',
    undefined,
    201,
  ],
  [
    'POST /apikeys/:id/rotate/key',
    'POST',
    (k) => `/apikeys/${k.rotateKey.key}/rotate/key`,
    'key',
    undefined,
    201,
  ],
  [
    'POST /apikeys/verify (a key not cached)',
    'POST',
    () => '/apikeys/verify',
    'none',
    (k) => ({ key: k.uncached.key, secret: k.uncached.secret }),
    200,
  ],
  ['GET /apikeys/:id/usage/jwt', 'GET', (k) => `/apikeys/${k.get.key}/usage/jwt`, 'jwt', undefined, 200],
  ['GET /apikeys/:id/usage/key', 'GET', (k) => `/apikeys/${k.get.key}/usage/key`, 'key', undefined, 200],
  ['GET /forward-auth (a key not cached)', 'GET', () => '/forward-auth', 'none', undefined, 200],
  ['GET /health', 'GET', () => '/health', 'none', undefined, 200],
  ['GET /admin/users/:userId/apikeys', 'GET', () => `/admin/users/${USER}/apikeys`, 'admin', undefined, 200],
  [
    'POST /admin/users/:userId/apikeys',
    'POST',
    () => `/admin/users/${USER}/apikeys`,
    'admin',
    () => createBody,
    201,
  ],
  ['GET /admin/apikeys/:id', 'GET', (k) => `/admin/apikeys/${k.get.key}`, 'admin', undefined, 200],
  [
    'PATCH /admin/apikeys/:id',
    'PATCH',
    (k) => `/admin/apikeys/${k.get.key}`,
    'admin',
    () => ({ name: 'x' }),
    200,
  ],
  [
    'DELETE /admin/apikeys/:id',
    'DELETE',
    (k) => `/admin/apikeys/${k.deleteAdmin.key}`,
    'admin',
    undefined,
    204,
  ],
  [
    'GET /admin/apikeys/:id/usage',
    'GET',
    (k) => `/admin/apikeys/${k.get.key}/usage`,
    'admin',
    undefined,
    200,
  ],
  ['GET /admin/users/:userId/usage', 'GET', () => `/admin/users/${USER}/usage`, 'admin', undefined, 200],
  // Another user's: revoking USER's keys would take the credentials the other routes use.
  ['DELETE /admin/users/:userId/apikeys', 'DELETE', () => '/admin/users/5/apikeys', 'admin', undefined, 200],
  [
    'PUT /admin/users/:userId/policy',
    'PUT',
    () => `/admin/users/${USER}/policy`,
    'admin',
    () => ({ ratelimit: null, credits: null, maxKeys: null, maxLevel: null }),
    200,
  ],
  ['GET /admin/users/:userId/policy', 'GET', () => `/admin/users/${USER}/policy`, 'admin', undefined, 200],
  ['DELETE /admin/users/:userId/policy', 'DELETE', () => '/admin/users/5/policy', 'admin', undefined, 404],
];

const basic = ({ key, secret }: Key) => ({
  authorization: `Basic ${Buffer.from(`${key}:${secret}`).toString('base64')}`,
});

async function send(replica: Replica, keys: Keys, [name, method, path, credentials, body]: RouteCase) {
  const headers =
    credentials === 'jwt'
      ? await bearerFor(USER)
      : credentials === 'admin'
        ? await operatorBearer()
        : credentials === 'key'
          ? basic(keys.cached) // a cached credential: what fails is the route's own use of the database
          : name.startsWith('GET /forward-auth')
            ? basic(keys.uncached)
            : {};
  return replica.req(method, path(keys), { headers, body: body?.(keys) });
}

describe.skipIf(TEST_ENGINE !== 'postgres')('a replica while PostgreSQL is down', () => {
  // Its own server: stopping the run's shared one would stop every other test's databases.
  let server: ThrowawayPostgres | undefined;
  let replica: Replica | undefined;
  afterAll(async () => {
    await replica?.stop();
    server?.destroy();
  });

  it('answers 503 with Retry-After on every route that needs the database, and recovers alone', async () => {
    server = await startPostgres();
    const one = await startReplica(server.url, { KEY_CACHE_SECONDS: '3600' });
    replica = one;
    const jwt = await bearerFor(USER);
    const create = async () => {
      const created = await one.req('POST', '/apikeys/jwt', { headers: jwt, body: createBody });
      expect(created.status).toBe(201);
      return created.json.apikey as Key;
    };
    const keys: Keys = {
      cached: await create(),
      uncached: await create(),
      get: await create(),
      deleteJwt: await create(),
      deleteKey: await create(),
      rotateJwt: await create(),
      rotateKey: await create(),
      deleteAdmin: await create(),
    };
    const verifyCached = () =>
      one.req('POST', '/apikeys/verify', { body: { key: keys.cached.key, secret: keys.cached.secret } });
    expect((await verifyCached()).json.code).toBe('VALID');

    server.stop('immediate');
    const answers: Record<string, unknown> = {};
    for (const route of ROUTES) {
      const { status, headers, json } = await send(one, keys, route);
      answers[route[0]] = { status, retryAfter: headers.get('retry-after'), json };
    }
    const unavailable = {
      status: 503,
      retryAfter: '1',
      json: { result: 'error', error: expect.any(String) },
    };
    expect(answers).toEqual(Object.fromEntries(ROUTES.map(([name]) => [name, unavailable])));
    const cached = await verifyCached();
    expect({ status: cached.status, code: cached.json.code }).toEqual({ status: 200, code: 'VALID' });
    // Long enough for the LISTEN connection to fail and retry, which the client reports.
    await within(10_000, async () => one.lines('database client warning').length > 0);

    // pg_ctl start -w returns once PostgreSQL accepts connections (its crash recovery after an
    // immediate stop alone takes 0.3-1 s here): keygate's own part of the recovery is counted from then.
    server.start();
    const ready = performance.now();
    await within(10_000, async () => (await one.req('GET', '/health')).status === 200);
    const healthMs = performance.now() - ready;
    const recovered: Record<string, number> = {};
    const tries: Record<string, number> = {};
    for (const route of ROUTES) {
      let status = 503;
      tries[route[0]] = 0;
      await within(10_000, async () => {
        tries[route[0]] = (tries[route[0]] ?? 0) + 1;
        status = (await send(one, keys, route)).status;
        return status !== 503;
      });
      recovered[route[0]] = status;
    }
    const allMs = performance.now() - ready;
    console.log(
      `recovered: /health after ${Math.round(healthMs)} ms, every route after ${Math.round(allMs)} ms`,
    );
    expect(recovered).toEqual(Object.fromEntries(ROUTES.map(([name, , , , , up]) => [name, up])));
    // No reconnect backoff of keygate's own: once /health answers, every route answers on its first
    // try, and /health answers within 200 ms of PostgreSQL's return.
    expect(tries).toEqual(Object.fromEntries(ROUTES.map(([name]) => [name, 1])));
    expect(healthMs).toBeLessThan(200);
    expect((await verifyCached()).json.code).toBe('VALID');

    expect(await one.stop()).toBe(0);
    expect(one.notJson()).toEqual([]);
    const lines = one.lines();
    expect(lines.filter((line) => line.status === 500 || line.msg === 'unexpected error')).toEqual([]);
    // Warnings and errors name codes, never the failed query, a user id or a key id.
    const problems = JSON.stringify(lines.filter((line) => line.level === 'warn' || line.level === 'error'));
    for (const secretish of ['Failed query', 'params', 'api_keys', String(USER)]) {
      expect(problems).not.toContain(secretish);
    }
    for (const { key } of Object.values(keys)) expect(problems).not.toContain(key);
  }, 90_000);
});
