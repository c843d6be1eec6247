// The operator's lookups, on each engine: GET /admin/users (the users holding live keys or a
// policy, in pages), GET /admin/apikeys (every live key newest first, in pages, found by id prefix or
// a part of the name) and GET /admin/overview (keys alive, created and verified by code over a day and
// a month, the ten keys and users with the most VALID verifications), with an injected clock.
import { afterEach, beforeAll, describe, expect, it } from 'bun:test';
import { generateKeyId } from '../../src/apikeys/secrets';
import { START, type TestKeygate, testKeygate } from '../support/keygate';
import { sharedPostgres, TEST_ENGINE } from '../support/postgres';
import { rawQuery } from '../support/raw-query';

// Starting the run's PostgreSQL takes longer than one test may.
beforeAll(async () => {
  if (TEST_ENGINE === 'postgres') await sharedPostgres();
}, 60_000);

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const open: TestKeygate[] = [];
afterEach(async () => {
  for (const k of open.splice(0)) await k.close();
});
async function keygate(env: Record<string, string> = {}) {
  const k = await testKeygate(env);
  open.push(k);
  return k;
}

type Key = Awaited<ReturnType<TestKeygate['createKey']>>;
type Item = { key: string; name: string; userId: number };

const get = async (k: TestKeygate, path: string) => k.req('GET', path, { headers: await k.operator() });

/** Every page of `path` at `limit`, following nextCursor; `between` runs after each page. */
async function allPages(
  k: TestKeygate,
  path: string,
  list: 'apikeys' | 'users',
  between?: () => Promise<void>,
) {
  const items: Array<Record<string, unknown>> = [];
  let cursor: string | null = null;
  do {
    const separator = path.includes('?') ? '&' : '?';
    const response = await get(k, cursor === null ? path : `${path}${separator}cursor=${cursor}`);
    expect(response.status).toBe(200);
    items.push(...response.json[list]);
    cursor = response.json.nextCursor;
    await between?.();
  } while (cursor !== null);
  return items;
}

const verify = (k: TestKeygate, body: Record<string, unknown>) => k.req('POST', '/apikeys/verify', { body });
const verifyKey = (k: TestKeygate, key: Key, secret = key.secret) => verify(k, { key: key.key, secret });
/** A secret that differs from the key's own in its last character, whatever that was. */
const wrongSecret = (key: Key) => `${key.secret.slice(0, -1)}${key.secret.endsWith('x') ? 'y' : 'x'}`;

describe('who may ask', () => {
  const PATHS = ['/admin/users', '/admin/apikeys', '/admin/apikeys?q=ci', '/admin/overview'];

  it.each(PATHS)(
    '%s: 401 without a credential or with a key’s, 403 for a user’s token, 200 for the operator',
    async (path) => {
      const k = await keygate();
      const key = await k.createKey(42, { level: 8 });
      const schemes: Array<Record<string, string>> = [
        {},
        k.basic(key.key, key.secret),
        { 'x-api-key': key.key, 'x-api-secret': key.secret },
      ];
      for (const headers of schemes) {
        const refused = await k.req('GET', path, { headers });
        expect(refused.status).toBe(401);
        expect(refused.headers.get('www-authenticate')).toContain('Bearer');
        expect(refused.json).toEqual({ result: 'error', error: expect.any(String) });
      }
      expect((await k.req('GET', path, { headers: await k.bearer(42, 8) })).status).toBe(403);
      expect((await get(k, path)).status).toBe(200);
    },
  );

  it('keeps GET /admin/apikeys/:id answering one key beside the list', async () => {
    const k = await keygate();
    const key = await k.createKey(42);
    const one = await get(k, `/admin/apikeys/${key.key}`);
    expect(one.status).toBe(200);
    expect(one.json.apikey.key).toBe(key.key);
    expect((await get(k, '/admin/apikeys')).json.apikeys.map((item: Item) => item.key)).toEqual([key.key]);
  });
});

describe('400 for a bad query', () => {
  const BAD: Array<[string, string]> = [
    ['/admin/users?limit=0', 'limit'],
    ['/admin/users?limit=101', 'limit'],
    ['/admin/users?limit=ten', 'limit'],
    ['/admin/users?cursor=nope', 'cursor'],
    ['/admin/users?q=ci', 'only limit and cursor'],
    ['/admin/users?limit=1&limit=2', 'twice'],
    ['/admin/apikeys?limit=0', 'limit'],
    ['/admin/apikeys?cursor=nope', 'cursor'],
    ['/admin/apikeys?name=ci', 'only limit, cursor and q'],
    ['/admin/apikeys?q=', 'q must be 1 to 128 characters'],
    [`/admin/apikeys?q=${'x'.repeat(129)}`, 'q must be 1 to 128 characters'],
    ['/admin/apikeys?q=a&q=b', 'twice'],
    ['/admin/apikeys?q=kg_abc%25', 'letters and digits after kg_'],
    ['/admin/overview?since=x', 'no query parameters'],
  ];

  it.each(BAD)('%s', async (path, words) => {
    const k = await keygate();
    const response = await get(k, path);
    expect(response.status).toBe(400);
    expect(response.json.error).toContain(words);
  });

  it('accepts q of 128 characters, and one user list’s cursor is not the other list’s', async () => {
    const k = await keygate();
    expect((await get(k, `/admin/apikeys?q=${'x'.repeat(128)}`)).status).toBe(200);
    await k.createKey(1);
    await k.createKey(2);
    const users = await get(k, '/admin/users?limit=1');
    const keys = await get(k, '/admin/apikeys?limit=1');
    expect((await get(k, `/admin/apikeys?cursor=${users.json.nextCursor}`)).status).toBe(400);
    expect((await get(k, `/admin/users?cursor=${keys.json.nextCursor}`)).status).toBe(400);
  });
});

describe('GET /admin/apikeys', () => {
  it('lists every user’s live keys newest first, in pages, with key info', async () => {
    const k = await keygate();
    const created: Key[] = [];
    for (const user of [7, 3, 7, 9, 3]) {
      k.time.now += 1000;
      created.push(await k.createKey(user, { name: `key of ${user}` }));
    }
    // Expired: not listed.
    await k.createKey(5, { expiresIn: 1 });
    k.time.now += 2000;
    const first = await get(k, '/admin/apikeys?limit=2');
    expect(first.json.apikeys).toHaveLength(2);
    expect(first.json.apikeys[0]).toEqual({
      key: created[4]?.key,
      name: 'key of 3',
      level: 3,
      userId: 3,
      createdAt: new Date(START + 5000).toISOString(),
      expiresAt: new Date(START + 5000 + 3600_000).toISOString(),
      enabled: true,
      lastUsedAt: null,
    });
    const all = await allPages(k, '/admin/apikeys?limit=2', 'apikeys');
    expect(all.map((item) => item.key)).toEqual(created.map((key) => key.key).reverse());
  });

  it('repeats and skips nothing when keys are created between two pages', async () => {
    const k = await keygate();
    const before: string[] = [];
    for (let i = 0; i < 7; i++) {
      k.time.now += 1;
      before.push((await k.createKey(i % 3, { name: `k${i}` })).key);
    }
    const meanwhile: string[] = [];
    const seen = await allPages(k, '/admin/apikeys?limit=3', 'apikeys', async () => {
      k.time.now += 1;
      meanwhile.push((await k.createKey(4, { name: 'new' })).key);
    });
    const keys = seen.map((item) => item.key);
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys).toEqual([...before].reverse());
    // The ones created meanwhile come first on a new walk.
    const again = (await get(k, '/admin/apikeys?limit=100')).json.apikeys.map((item: Item) => item.key);
    expect(again).toEqual([...meanwhile.reverse(), ...before.reverse()]);
  });

  it('q starting with kg_ is a key id prefix', async () => {
    const k = await keygate();
    const keys: Key[] = [];
    for (let i = 0; i < 4; i++) {
      k.time.now += 1000;
      keys.push(await k.createKey(i, { name: 'same' }));
    }
    const target = keys[1] as Key;
    const found = async (q: string) =>
      (await get(k, `/admin/apikeys?q=${q}`)).json.apikeys.map((item: Item) => item.key);
    expect(await found(target.key)).toEqual([target.key]);
    expect(await found(target.key.slice(0, -3))).toEqual([target.key]);
    expect(await found('kg_')).toEqual(keys.map((key) => key.key).reverse());
    expect(await found(`${target.key}0`)).toEqual([]);
    // Ids are case-sensitive.
    const flipped =
      target.key.slice(0, 3) +
      [...target.key.slice(3)]
        .map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()))
        .join('');
    if (flipped !== target.key) expect(await found(flipped)).toEqual([]);
  });

  it('a prefix matching thousands of ids pages newest first as a narrow one does', async () => {
    const k = await keygate();
    // 2,500 keys written straight into the database (past the 2,000 a prefix's range is sorted up to).
    const ids: string[] = [];
    const postgres = k.keygate.client.engine === 'postgres';
    for (let batch = 0; batch < 5; batch++) {
      const values: string[] = [];
      const params: unknown[] = [];
      for (let i = 0; i < 500; i++) {
        const createdAt = START - 10_000_000 + (batch * 500 + i) * 1000;
        const id = generateKeyId(createdAt);
        ids.push(id);
        const n = params.length;
        values.push(`($${n + 1}, $${n + 2}, 7, 1, 'bulk', $${n + 3}, $${n + 4})`);
        params.push(id, postgres ? '00' : new Uint8Array([0]), createdAt, START + DAY);
      }
      await rawQuery(
        k.keygate,
        `INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at) VALUES ${values.join(', ')}`,
        params,
      );
    }
    const newest = [...ids].reverse();
    for (const q of ['kg_', (ids[0] as string).slice(0, 5)]) {
      const first = await get(k, `/admin/apikeys?q=${q}&limit=3`);
      expect(first.json.apikeys.map((item: Item) => item.key)).toEqual(newest.slice(0, 3));
      const second = await get(k, `/admin/apikeys?q=${q}&limit=3&cursor=${first.json.nextCursor}`);
      expect(second.json.apikeys.map((item: Item) => item.key)).toEqual(newest.slice(3, 6));
    }
    const narrow = await get(k, `/admin/apikeys?q=${ids[1234]}`);
    expect(narrow.json.apikeys.map((item: Item) => item.key)).toEqual([ids[1234]]);
  });

  it('any other q is a part of the name, without case; % and _ are characters like any other', async () => {
    const k = await keygate();
    const names = [
      'Billing Service',
      'nightly billing',
      'CI',
      '50% off',
      '50 off',
      'a_b',
      'axb',
      'BILLING_2',
    ];
    const byName = new Map<string, string>();
    for (const name of names) {
      k.time.now += 1000;
      byName.set(name, (await k.createKey(1, { name })).key);
    }
    const found = async (q: string) =>
      (await get(k, `/admin/apikeys?q=${encodeURIComponent(q)}`)).json.apikeys.map((item: Item) => item.name);
    expect(await found('billing')).toEqual(['BILLING_2', 'nightly billing', 'Billing Service']);
    expect(await found('BiLLinG s')).toEqual(['Billing Service']);
    expect(await found('%')).toEqual(['50% off']);
    expect(await found('50%')).toEqual(['50% off']);
    expect(await found('_')).toEqual(['BILLING_2', 'a_b']);
    expect(await found('a_b')).toEqual(['a_b']);
    expect(await found('ci')).toEqual(['CI']);
    expect(await found('nothing like it')).toEqual([]);
    // Paged within the matches.
    const paged = await allPages(k, '/admin/apikeys?q=billing&limit=1', 'apikeys');
    expect(paged.map((item) => item.name)).toEqual(['BILLING_2', 'nightly billing', 'Billing Service']);
  });
});

describe('GET /admin/users', () => {
  it('lists the users holding live keys or a policy, ascending, with their keys, last use and policy', async () => {
    const k = await keygate();
    const used = await k.createKey(12);
    await k.createKey(12);
    await k.createKey(30, { expiresIn: 1 }); // only expired keys: not listed
    await k.createKey(5);
    const policy = {
      ratelimit: null,
      credits: { remaining: 10 },
      maxKeys: 3,
      maxLevel: null,
      permissions: null,
    };
    const put = await k.req('PUT', '/admin/users/20/policy', { headers: await k.operator(), body: policy });
    expect(put.status).toBe(200);
    k.time.now += 2000;
    expect((await verifyKey(k, used)).json.code).toBe('VALID');
    const response = await get(k, '/admin/users');
    expect(response.status).toBe(200);
    expect(response.json).toEqual({
      result: 'success',
      users: [
        { userId: 5, keys: 1, lastUsedAt: null },
        // Its use is counted in memory: the list writes it first.
        { userId: 12, keys: 2, lastUsedAt: new Date(START + 2000).toISOString() },
        { userId: 20, keys: 0, lastUsedAt: null, policy: { ...policy, credits: { remaining: 10 } } },
      ],
      nextCursor: null,
    });
  });

  it('pages by limit and cursor, each user once', async () => {
    const k = await keygate();
    const users = [9, 2, 40, 17, 3];
    for (const user of users) await k.createKey(user);
    const walked = await allPages(k, '/admin/users?limit=2', 'users', async () => {
      await k.createKey(1); // below the cursor: not on a later page
    });
    expect(walked.map((user) => user.userId)).toEqual([...users].sort((a, b) => a - b));
  });

  it('drops a user once its keys are deleted and it has no policy', async () => {
    const k = await keygate();
    await k.createKey(8);
    const revoked = await k.req('DELETE', '/admin/users/8/apikeys', { headers: await k.operator() });
    expect(revoked.status).toBe(200);
    expect((await get(k, '/admin/users')).json.users).toEqual([]);
  });

  it('with JWT_USER_IDS=mapped, names each user’s subject', async () => {
    const k = await keygate({ JWT_USER_IDS: 'mapped' });
    const a = await k.createKey('auth0|alice');
    const b = await k.createKey('auth0|bob');
    const users = (await get(k, '/admin/users')).json.users;
    expect(users).toEqual(
      [
        { userId: a.userId, subject: 'auth0|alice', keys: 1, lastUsedAt: null },
        { userId: b.userId, subject: 'auth0|bob', keys: 1, lastUsedAt: null },
      ].sort((x, y) => x.userId - y.userId),
    );
  });
});

describe('GET /admin/overview', () => {
  it('counts keys alive and keys created over the day and the month, rotations and deleted keys included', async () => {
    const k = await keygate();
    const a = await k.createKey(1, { expiresIn: 40 * 24 * 3600 });
    const b = await k.createKey(2, { expiresIn: 40 * 24 * 3600 });
    await k.createKey(3, { expiresIn: 1 });
    k.time.now += HOUR;
    const rotated = await k.req('POST', `/apikeys/${a.key}/rotate/jwt`, { headers: await k.bearer(1) });
    expect(rotated.status).toBe(201);
    const deleted = await k.req('DELETE', `/apikeys/${b.key}/jwt`, { headers: await k.bearer(2) });
    expect(deleted.status).toBe(204);
    const now = (await get(k, '/admin/overview')).json;
    // The rotated key stopped at once (no grace): alive are its successor only.
    expect(now.keys).toBe(1);
    expect(now.created).toEqual({ day: 4, month: 4 });
    k.time.now = START + 25 * HOUR;
    expect((await get(k, '/admin/overview')).json.created).toEqual({ day: 0, month: 4 });
    k.time.now = START + 30 * DAY + HOUR;
    expect((await get(k, '/admin/overview')).json.created).toEqual({ day: 0, month: 0 });
  });

  it('counts verify and forward-auth answers by code, tokens’ too; not a missing credential', async () => {
    const k = await keygate();
    const key = await k.createKey(1, { level: 2 });
    const token = await k.token(5, { level: 4 });
    await verifyKey(k, key);
    await verifyKey(k, key);
    await verify(k, { key: key.key, secret: key.secret, minLevel: 5 }); // INSUFFICIENT_LEVEL
    await verifyKey(k, key, wrongSecret(key)); // NOT_FOUND
    await verify(k, { key: `kg_${'Z'.repeat(22)}`, secret: key.secret }); // an unknown key: NOT_FOUND
    await verify(k, { token }); // VALID
    await verify(k, { token: `${token}x` }); // INVALID_TOKEN
    expect((await k.req('GET', '/forward-auth', { headers: k.basic(key.key, key.secret) })).status).toBe(200);
    expect(
      (await k.req('GET', '/forward-auth', { headers: { authorization: `Bearer ${token}` } })).status,
    ).toBe(200);
    const missing = await k.req('GET', '/forward-auth');
    expect(missing.status).toBe(401);
    // A malformed credential answers with a code: counted under it.
    const malformed = await k.req('GET', '/forward-auth', { headers: { authorization: 'Basic !!!' } });
    expect(malformed.headers.get('x-keygate-code')).toBe('NOT_FOUND');
    // A bad body is no verification.
    expect((await verify(k, { key: key.key })).status).toBe(400);
    const expected = { VALID: 5, INSUFFICIENT_LEVEL: 1, NOT_FOUND: 3, INVALID_TOKEN: 1 };
    const overview = (await get(k, '/admin/overview')).json;
    expect(overview.verifications).toEqual({ day: expected, month: expected });
    // A day later only the month holds them; 30 days later neither.
    k.time.now = START + 24 * HOUR;
    expect((await get(k, '/admin/overview')).json.verifications).toEqual({ day: {}, month: expected });
    k.time.now = START + 30 * DAY;
    expect((await get(k, '/admin/overview')).json.verifications).toEqual({ day: {}, month: {} });
  });

  it('the last 24 hours are whole hours, the current one included', async () => {
    const k = await keygate();
    const key = await k.createKey(1, { expiresIn: 3 * 24 * 3600 });
    await verifyKey(k, key); // 10:00
    k.time.now = START + 23 * HOUR + 59 * 60_000; // 09:59 the next day: still within the 24 hours
    expect((await get(k, '/admin/overview')).json.verifications.day).toEqual({ VALID: 1 });
    expect((await get(k, '/admin/overview')).json.topKeys).toHaveLength(1);
    k.time.now = START + 24 * HOUR; // 10:00: the hour counted first has left
    expect((await get(k, '/admin/overview')).json.verifications.day).toEqual({});
    expect((await get(k, '/admin/overview')).json.topKeys).toEqual([]);
  });

  it('does not count forward-auth refusals by NO_RULE', async () => {
    const k = await keygate({ FORWARD_AUTH_DEFAULT: 'deny' });
    const key = await k.createKey(1);
    const refused = await k.req('GET', '/forward-auth', { headers: k.basic(key.key, key.secret) });
    expect(refused.headers.get('x-keygate-code')).toBe('NO_RULE');
    expect((await get(k, '/admin/overview')).json.verifications.day).toEqual({});
  });

  it('ranks the ten keys and ten users with the most VALID verifications over the last 24 hours, zeros left out', async () => {
    const k = await keygate();
    // Users 1..12 with one key each, verified 1..12 times; user 13's key only refused; user 1 also
    // holds a second key verified 20 times, 25 hours ago (outside the day).
    const keys: Key[] = [];
    for (let user = 1; user <= 13; user++) keys.push(await k.createKey(user, { expiresIn: 3 * 24 * 3600 }));
    const old = await k.createKey(1, { name: 'old', expiresIn: 3 * 24 * 3600 });
    for (let i = 0; i < 20; i++) await verifyKey(k, old);
    k.time.now = START + 25 * HOUR;
    for (let user = 1; user <= 12; user++) {
      for (let i = 0; i < user; i++) await verifyKey(k, keys[user - 1] as Key);
    }
    await verifyKey(k, keys[12] as Key, wrongSecret(keys[12] as Key));
    await verify(k, { key: (keys[12] as Key).key, secret: (keys[12] as Key).secret, minLevel: 8 });
    const overview = (await get(k, '/admin/overview')).json;
    expect(overview.topKeys).toEqual(
      [12, 11, 10, 9, 8, 7, 6, 5, 4, 3].map((user) => ({
        key: keys[user - 1]?.key,
        userId: user,
        name: 'test',
        valid: user,
      })),
    );
    expect(overview.topUsers).toEqual(
      [12, 11, 10, 9, 8, 7, 6, 5, 4, 3].map((user) => ({ userId: user, valid: user })),
    );
    expect(overview.verifications.day).toEqual({ VALID: 78, NOT_FOUND: 1, INSUFFICIENT_LEVEL: 1 });
    expect(overview.verifications.month).toEqual({ VALID: 98, NOT_FOUND: 1, INSUFFICIENT_LEVEL: 1 });
  });

  it('sums a user’s keys in topUsers, and leaves out a key deleted since', async () => {
    const k = await keygate();
    const a1 = await k.createKey(1);
    const a2 = await k.createKey(1);
    const b = await k.createKey(2);
    for (const [key, times] of [
      [a1, 2],
      [a2, 2],
      [b, 3],
    ] as const) {
      for (let i = 0; i < times; i++) await verifyKey(k, key);
    }
    let overview = (await get(k, '/admin/overview')).json;
    expect(overview.topUsers).toEqual([
      { userId: 1, valid: 4 },
      { userId: 2, valid: 3 },
    ]);
    expect(overview.topKeys[0]).toEqual({ key: b.key, userId: 2, name: 'test', valid: 3 });
    const deleted = await k.req('DELETE', `/admin/apikeys/${b.key}`, { headers: await k.operator() });
    expect(deleted.status).toBe(204);
    overview = (await get(k, '/admin/overview')).json;
    expect(overview.topKeys.map((top: { key: string }) => top.key).sort()).toEqual([a1.key, a2.key].sort());
    expect(overview.topUsers).toEqual([{ userId: 1, valid: 4 }]);
    // The verifications stay counted, and so does the deleted key's creation.
    expect(overview.verifications.day).toEqual({ VALID: 7 });
    expect(overview.created.day).toBe(3);
    expect(overview.keys).toBe(2);
  });
});
