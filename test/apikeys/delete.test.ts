// Deleting keys over HTTP, under both schemes: 204 with no body, and every unhappy path.
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
});
afterEach(() => k.close());

/** Credentials for user 42 at level 8 under each scheme. */
const schemes = {
  jwt: async () => k.bearer(42),
  key: async () => {
    const parent = await k.createKey(42, { level: 8, name: 'parent' });
    return k.basic(parent.key, parent.secret);
  },
};

describe.each(Object.keys(schemes) as Array<keyof typeof schemes>)('DELETE /apikeys/:id/%s', (scheme) => {
  const path = (id: string) => `/apikeys/${id}/${scheme}`;

  it('deletes the key: 204, no body, and it no longer authenticates', async () => {
    const victim = await k.createKey(42);
    const response = await k.req('DELETE', path(victim.key), { headers: await schemes[scheme]() });
    expect(response.status).toBe(204);
    expect(response.text).toBe('');
    expect(await k.keygate.store.findKey(victim.key)).toBeUndefined();
    const reuse = await k.req('POST', '/apikeys/key', {
      headers: k.basic(victim.key, victim.secret),
      body: { name: 'x', level: 0, expiresIn: 60 },
    });
    expect(reuse.status).toBe(403);
  });

  it('answers 404 the second time', async () => {
    const victim = await k.createKey(42);
    const headers = await schemes[scheme]();
    expect((await k.req('DELETE', path(victim.key), { headers })).status).toBe(204);
    const again = await k.req('DELETE', path(victim.key), { headers });
    expect(again.status).toBe(404);
    expect(again.json.result).toBe('error');
  });

  it('answers 401 with WWW-Authenticate without credentials, whatever the id', async () => {
    for (const id of ['kg_0000000000000000000000', 'not-a-key']) {
      const response = await k.req('DELETE', path(id));
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBeTruthy();
      expect(response.json.result).toBe('error');
    }
  });

  it('answers 400 for an id not of the key format', async () => {
    const headers = await schemes[scheme]();
    for (const id of [
      'abc',
      'kg_short',
      'kg_0000000000000000000000%2F..',
      'kg_%2E%2E',
      'KG_0000000000000000000000',
    ]) {
      const response = await k.req('DELETE', path(id), { headers });
      expect(response.status).toBe(400);
      expect(response.json.error).toContain('kg_');
    }
  });

  it('answers 404 for a dot-segment id, which URL rules resolve to another path', async () => {
    const response = await k.req('DELETE', path('%2E%2E'), { headers: await schemes[scheme]() });
    expect(response.status).toBe(404);
    expect(response.json.result).toBe('error');
  });

  it('answers 404 for an unknown key of the right format', async () => {
    const response = await k.req('DELETE', path('kg_0000000000000000000000'), {
      headers: await schemes[scheme](),
    });
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toStartWith('application/json');
  });

  it("answers 404, never 403, for another user's key, and leaves it alone", async () => {
    const others = await k.createKey(7, { level: 0 });
    const response = await k.req('DELETE', path(others.key), { headers: await schemes[scheme]() });
    expect(response.status).toBe(404);
    expect(await k.keygate.store.findKey(others.key)).toBeDefined();
  });

  it('answers 404 for an expired key that the purge has not removed yet', async () => {
    const victim = await k.createKey(42, { expiresIn: 60 });
    const headers = await schemes[scheme]();
    k.time.now += 60_000;
    expect(await k.keygate.store.findKey(victim.key)).toBeDefined();
    // The /key parent expires too unless it outlives the victim; it does (3600 s).
    expect((await k.req('DELETE', path(victim.key), { headers })).status).toBe(404);
  });

  it('ignores a body sent with DELETE', async () => {
    const victim = await k.createKey(42);
    const headers = { ...(await schemes[scheme]()), 'content-type': 'text/plain' };
    expect((await k.req('DELETE', path(victim.key), { headers, body: 'ignored' })).status).toBe(204);
  });
});
