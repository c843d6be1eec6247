// Listing and getting keys under both schemes: only the caller's user's live keys at or below its
// level, newest first, keyset pages, never a secret or hash; every 400, 401, 403 and 404.
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { encodeCursor } from '../../src/apikeys/cursor';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
});
afterEach(() => k.close());

/** Credentials for user 42 at `level` under each scheme. */
const schemes = {
  jwt: (level?: number) => k.credentials('jwt', 42, level),
  key: (level?: number) => k.credentials('key', 42, level),
};
type Scheme = keyof typeof schemes;
const SCHEMES = Object.keys(schemes) as Scheme[];

describe.each(SCHEMES)('GET /apikeys/%s (list)', (scheme) => {
  const list = async (query = '', headers?: Record<string, string>) =>
    k.req('GET', `/apikeys/${scheme}${query}`, { headers: headers ?? (await schemes[scheme]()) });

  it('shows the live keys of the caller only, newest first, as A objects without secrets', async () => {
    const headers = await schemes[scheme](5);
    k.time.now += 1000;
    const older = await k.createKey(42, { name: 'older', level: 2 });
    k.time.now += 1000;
    const newer = await k.createKey(42, { name: 'newer', level: 5 });
    await k.createKey(42, { name: 'above', level: 6 });
    await k.createKey(7, { name: 'another user', level: 1 });
    const expiring = await k.createKey(42, { name: 'expiring', level: 1, expiresIn: 1 });
    k.time.now += 1000;
    const response = await list('', headers);
    expect(response.status).toBe(200);
    // No item has a secret field (a substring test could hit "secret" inside a random key id).
    for (const item of response.json.apikeys) expect(Object.keys(item)).not.toContain('secret');
    expect(response.text).not.toContain(newer.secret);
    const names = response.json.apikeys.map((item: { name: string }) => item.name);
    expect(names).not.toContain('above');
    expect(names).not.toContain('another user');
    expect(names).not.toContain(expiring.name);
    expect(response.json.apikeys.slice(0, 2)).toEqual([
      {
        key: newer.key,
        name: 'newer',
        level: 5,
        userId: 42,
        createdAt: new Date(k.time.now - 1000).toISOString(),
        expiresAt: newer.expiresAt,
        lastUsedAt: null,
      },
      {
        key: older.key,
        name: 'older',
        level: 2,
        userId: 42,
        createdAt: new Date(k.time.now - 2000).toISOString(),
        expiresAt: older.expiresAt,
        lastUsedAt: null,
      },
    ]);
    expect(response.json.nextCursor).toBeNull();
    expect(response.json.result).toBe('success');
  });

  it('pages by limit with an opaque cursor, and the last page has nextCursor null', async () => {
    const headers = await schemes[scheme]();
    const created: string[] = [];
    for (let i = 0; i < 5; i++) {
      k.time.now += 1;
      created.unshift((await k.createKey(42, { name: `k${i}` })).key);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = cursor === null ? '?limit=2' : `?limit=2&cursor=${cursor}`;
      const response = await list(query, headers);
      expect(response.status).toBe(200);
      expect(response.json.apikeys.length).toBeLessThanOrEqual(2);
      seen.push(...response.json.apikeys.map((item: { key: string }) => item.key));
      cursor = response.json.nextCursor;
      if (cursor !== null) expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      pages++;
    } while (cursor !== null);
    // The key scheme's own caller key is the oldest and comes last.
    expect(seen.slice(0, 5)).toEqual(created);
    expect(pages).toBe(Math.ceil(seen.length / 2));
  });

  it('defaults to 50 and allows 100', async () => {
    const headers = await schemes[scheme]();
    for (let i = 0; i < 101; i++) await k.createKey(42, { name: `k${i}` });
    expect((await list('', headers)).json.apikeys).toHaveLength(50);
    expect((await list('?limit=100', headers)).json.apikeys).toHaveLength(100);
    expect((await list('?limit=1', headers)).json.apikeys).toHaveLength(1);
  });

  it.each([
    'limit=0',
    'limit=101',
    'limit=-1',
    'limit=1.5',
    'limit=abc',
    'limit=',
    'limit=01',
    'limit=1&limit=2',
    'cursor=',
    'cursor=abc',
    'cursor=!!!',
    'offset=10',
    'limit=10&page=2',
  ])('400 for ?%s', async (query) => {
    const response = await list(`?${query}`);
    expect(response.status).toBe(400);
    expect(response.json).toEqual({ result: 'error', error: expect.any(String) });
  });

  it('400 for a tampered or hand-made cursor that is not one it gave out', async () => {
    const headers = await schemes[scheme]();
    for (let i = 0; i < 3; i++) await k.createKey(42);
    const cursor = (await list('?limit=1', headers)).json.nextCursor as string;
    const text = Buffer.from(cursor, 'base64url').toString();
    const forged = [
      Buffer.from(`${text}!`).toString('base64url'),
      Buffer.from(text.replace('.', ':')).toString('base64url'),
      Buffer.from(`-1.${text.split('.')[1]}`).toString('base64url'),
      Buffer.from(`1.kg_short`).toString('base64url'),
      `${cursor}=`,
      Buffer.from(text).toString('base64'),
      cursor.slice(0, -1),
    ].filter((candidate) => candidate !== cursor);
    for (const candidate of forged) {
      const response = await list(`?cursor=${encodeURIComponent(candidate)}`, headers);
      expect([candidate, response.status]).toEqual([candidate, 400]);
    }
    expect((await list(`?cursor=${cursor}`, headers)).status).toBe(200);
  });

  it('a well-formed cursor only positions the list: it never shows another user’s keys', async () => {
    const headers = await schemes[scheme]();
    const others = await k.createKey(7);
    const response = await list(
      `?cursor=${encodeCursor({ createdAt: k.time.now + 1, id: 'kg_zzzzzzzzzzzzzzzzzzzzzz' })}`,
      headers,
    );
    expect(response.status).toBe(200);
    expect(response.text).not.toContain(others.key);
  });

  it('401 with WWW-Authenticate without credentials, even with a bad query', async () => {
    const response = await k.req('GET', `/apikeys/${scheme}?limit=0`);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBeTruthy();
  });

  it('403 for invalid credentials, even with a bad query', async () => {
    const headers =
      scheme === 'jwt'
        ? { authorization: 'Bearer nope' }
        : k.basic('kg_0000000000000000000000', 'wrong-secret');
    expect((await k.req('GET', `/apikeys/${scheme}?limit=0`, { headers })).status).toBe(403);
  });
});

describe.each(SCHEMES)('GET /apikeys/:id/%s (get)', (scheme) => {
  const get = (id: string, headers: Record<string, string>) =>
    k.req('GET', `/apikeys/${id}/${scheme}`, { headers });

  it('shows the caller’s own key without its secret', async () => {
    const headers = await schemes[scheme]();
    const key = await k.createKey(42, { name: 'mine', level: 4 });
    const response = await get(key.key, headers);
    expect(response.status).toBe(200);
    expect(response.json).toEqual({
      result: 'success',
      apikey: {
        key: key.key,
        name: 'mine',
        level: 4,
        userId: 42,
        createdAt: new Date(k.time.now).toISOString(),
        expiresAt: key.expiresAt,
        lastUsedAt: null,
      },
    });
    expect(response.text).not.toContain(key.secret);
  });

  it('404 alike for another user’s key, an expired key and an unknown key', async () => {
    const headers = await schemes[scheme]();
    const others = await k.createKey(7);
    const expiring = await k.createKey(42, { expiresIn: 5 });
    k.time.now += 5000;
    const bodies = new Set<string>();
    for (const id of [others.key, expiring.key, 'kg_0000000000000000000000']) {
      const response = await get(id, headers);
      expect(response.status).toBe(404);
      bodies.add(response.text);
    }
    expect(bodies.size).toBe(1);
  });

  it('403 for the caller’s own key above its level', async () => {
    const headers = await schemes[scheme](3);
    const high = await k.createKey(42, { level: 4 });
    const response = await get(high.key, headers);
    expect(response.status).toBe(403);
    expect(response.json.result).toBe('error');
  });

  it.each(['abc', 'kg_short', 'kg_0000000000000000000000!'])('400 for the id %s', async (id) => {
    const response = await get(encodeURIComponent(id), await schemes[scheme]());
    expect(response.status).toBe(400);
  });

  it('401 without credentials, whatever the id', async () => {
    for (const id of ['abc', 'kg_0000000000000000000000']) {
      const response = await k.req('GET', `/apikeys/${id}/${scheme}`);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBeTruthy();
    }
  });
});
