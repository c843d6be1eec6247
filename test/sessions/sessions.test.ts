// The console's sessions, on either engine: one-time links exchanged once within 5 minutes for
// an HttpOnly, SameSite=Strict cookie; sessions that expire (injected clock), end at logout and at
// revoke-all; every change refused without the CSRF token or from another origin; a user's session
// acting with exactly a token's rules and never reaching another user's keys; CONSOLE=off.
import { afterEach, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';
import { rawQuery } from '../support/raw-query';
import { codeOf, consoleSession, exchange, ORIGIN } from './support';

let k: TestKeygate;
afterEach(() => k?.close());

const NEW_KEY = { name: 'from the console', level: 2, expiresIn: 3600 };

describe('one-time links', () => {
  it('a token gives its user a link: a path with a 256-bit code in the fragment, valid 5 minutes', async () => {
    k = await testKeygate();
    const link = await k.req('POST', '/apikeys/sessions/jwt', { headers: await k.bearer(42, 5) });
    expect(link.status).toBe(201);
    expect(link.headers.get('cache-control')).toBe('no-store');
    expect(link.json).toEqual({
      result: 'success',
      url: expect.any(String),
      expiresAt: '2026-11-22T10:05:00.000Z',
    });
    expect(link.json.url).toMatch(/^\/console#code=[A-Za-z0-9_-]{43}$/);
    const opened = await exchange(k, link.json.url);
    expect(opened.status).toBe(200);
    expect(opened.json.session).toMatchObject({ kind: 'user', userId: 42, level: 5, by: 'jwt:42' });
    expect(opened.json.session.expiresAt).toBe('2026-11-22T11:00:00.000Z');
  });

  it('with PUBLIC_URL and BASE_PATH the link is absolute and the cookie Secure, under the base path', async () => {
    k = await testKeygate({ PUBLIC_URL: 'https://keys.example.com', BASE_PATH: '/auth' });
    const link = await k.req('POST', '/apikeys/sessions/jwt', { headers: await k.bearer(42) });
    expect(link.json.url).toMatch(/^https:\/\/keys\.example\.com\/auth\/console#code=/);
    const opened = await exchange(k, link.json.url, 'https://keys.example.com');
    expect(opened.status).toBe(200);
    const cookie = opened.headers.get('set-cookie') as string;
    expect(cookie).toMatch(/^keygate_session=[A-Za-z0-9_-]{43}; /);
    expect(cookie.split('; ').slice(1).sort()).toEqual(
      ['HttpOnly', 'Max-Age=3600', 'Path=/auth/console', 'SameSite=Strict', 'Secure'].sort(),
    );
  });

  it('without PUBLIC_URL the cookie is HttpOnly and SameSite=Strict, not Secure', async () => {
    k = await testKeygate();
    const { opened } = await consoleSession(k, { sub: 42, sessionSeconds: 600 });
    const cookie = opened.headers.get('set-cookie') as string;
    expect(cookie.split('; ').slice(1).sort()).toEqual(
      ['HttpOnly', 'Max-Age=600', 'Path=/console', 'SameSite=Strict'].sort(),
    );
  });

  it('a code opens one session: the second exchange is refused and sets no cookie', async () => {
    k = await testKeygate();
    const link = await k.req('POST', '/apikeys/sessions/jwt', { headers: await k.bearer(42) });
    expect((await exchange(k, link.json.url)).status).toBe(200);
    const again = await exchange(k, link.json.url);
    expect(again.status).toBe(403);
    expect(again.json.error).toBe('This console link was used already or has expired; ask for a new one.');
    expect(again.headers.get('set-cookie')).toBeNull();
  });

  it('two exchanges of one code at once: exactly one session', async () => {
    k = await testKeygate();
    const link = await k.req('POST', '/apikeys/sessions/jwt', { headers: await k.bearer(42) });
    const both = await Promise.all([exchange(k, link.json.url), exchange(k, link.json.url)]);
    expect(both.map((answer) => answer.status).sort()).toEqual([200, 403]);
  });

  it('a code expires after 5 minutes (injected clock); an unknown or malformed code is refused alike', async () => {
    k = await testKeygate();
    const link = await k.req('POST', '/apikeys/sessions/jwt', { headers: await k.bearer(42) });
    k.time.now += 5 * 60_000;
    expect((await exchange(k, link.json.url)).status).toBe(403);
    expect((await exchange(k, `#code=${'A'.repeat(43)}`)).status).toBe(403);
    expect((await exchange(k, '#code=short')).status).toBe(403);
    const fresh = await k.req('POST', '/apikeys/sessions/jwt', { headers: await k.bearer(42) });
    k.time.now += 5 * 60_000 - 1;
    expect((await exchange(k, fresh.json.url)).status).toBe(200);
  });

  it('the exchange must come from the console origin, with a body that is only the code', async () => {
    k = await testKeygate();
    const link = await k.req('POST', '/apikeys/sessions/jwt', { headers: await k.bearer(42) });
    expect((await exchange(k, link.json.url, 'https://evil.example')).status).toBe(403);
    const noOrigin = await k.req('POST', '/console/api/session', { body: { code: codeOf(link.json.url) } });
    expect(noOrigin.status).toBe(403);
    const extra = await k.req('POST', '/console/api/session', {
      headers: { origin: ORIGIN },
      body: { code: codeOf(link.json.url), userId: 1 },
    });
    expect(extra.status).toBe(400);
    // Refused before its exchange: the code still opens a session.
    expect((await exchange(k, link.json.url)).status).toBe(200);
  });

  it('the link routes check their bodies and credentials', async () => {
    k = await testKeygate();
    const user = await k.bearer(42);
    for (const body of [
      { sessionSeconds: 59 },
      { sessionSeconds: 86_401 },
      { sessionSeconds: '600' },
      { x: 1 },
      [],
    ]) {
      expect((await k.req('POST', '/apikeys/sessions/jwt', { headers: user, body })).status).toBe(400);
    }
    expect((await k.req('POST', '/apikeys/sessions/jwt')).status).toBe(401);
    expect((await k.req('POST', '/admin/sessions', { headers: user, body: { operator: true } })).status).toBe(
      403,
    );
    const operator = await k.operator();
    for (const body of [
      {},
      { userId: 1, operator: true },
      { operator: false },
      { userId: -1 },
      { userId: '1' },
    ]) {
      expect((await k.req('POST', '/admin/sessions', { headers: operator, body })).status).toBe(400);
    }
    const forUser = await k.req('POST', '/admin/sessions', {
      headers: operator,
      body: { userId: 7, sessionSeconds: 60 },
    });
    expect(forUser.status).toBe(201);
    const opened = await exchange(k, forUser.json.url);
    expect(opened.json.session).toMatchObject({ kind: 'user', userId: 7, level: 8, by: 'admin:ops' });
    expect(opened.json.session.expiresAt).toBe('2026-11-22T10:01:00.000Z');
  });

  it('codes and sessions are stored only as SHA-256 hashes, and no log line holds them', async () => {
    k = await testKeygate();
    const { link, cookie } = await consoleSession(k, { sub: 42 });
    const token = cookie.split('=')[1] as string;
    const rows = await rawQuery(k.keygate, 'SELECT token_hash, kind FROM console_sessions');
    expect(rows.map((row) => row.kind)).toEqual(['session']);
    const hash = new Bun.CryptoHasher('sha256').update(token).digest('hex');
    expect(rows[0]?.token_hash).toBe(hash);
    const log = k
      .logLines()
      .map((line) => JSON.stringify(line))
      .join('\n');
    expect(log).not.toContain(codeOf(link.json.url));
    expect(log).not.toContain(token);
    expect(k.logLines('console.link')).toEqual([expect.objectContaining({ userId: 42, by: 'jwt:42' })]);
  });
});

describe('sessions', () => {
  it('a session ends when its sessionSeconds have passed (injected clock)', async () => {
    k = await testKeygate();
    const session = await consoleSession(k, { sub: 42, sessionSeconds: 60 });
    expect((await k.req('GET', '/console/api/apikeys/session', { headers: session.read })).status).toBe(200);
    k.time.now += 60_000;
    const after = await k.req('GET', '/console/api/apikeys/session', { headers: session.read });
    expect(after.status).toBe(401);
    expect(after.json.error).toContain('The console session has ended');
  });

  it('CONSOLE_SESSION_SECONDS is the default length', async () => {
    k = await testKeygate({ CONSOLE_SESSION_SECONDS: '120' });
    const session = await consoleSession(k, { sub: 42 });
    expect(session.opened.json.session.expiresAt).toBe('2026-11-22T10:02:00.000Z');
  });

  it('logout ends the session (with its CSRF token) and clears the cookie', async () => {
    k = await testKeygate();
    const session = await consoleSession(k, { sub: 42 });
    expect((await k.req('DELETE', '/console/api/session', { headers: session.read })).status).toBe(403);
    const out = await k.req('DELETE', '/console/api/session', { headers: session.change });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toMatch(/^keygate_session=; Path=\/console; Max-Age=0; HttpOnly/);
    expect((await k.req('GET', '/console/api/session', { headers: session.read })).status).toBe(401);
  });

  it("revoke-all ends the user's sessions (and not another user's)", async () => {
    k = await testKeygate();
    const mine = await consoleSession(k, { sub: 42 });
    const theirs = await consoleSession(k, { sub: 43 });
    const revoked = await k.req('DELETE', '/admin/users/42/apikeys', { headers: await k.operator() });
    expect(revoked.status).toBe(200);
    expect((await k.req('GET', '/console/api/session', { headers: mine.read })).status).toBe(401);
    expect((await k.req('GET', '/console/api/session', { headers: theirs.read })).status).toBe(200);
  });

  it('no cookie, or a made-up one: 401', async () => {
    k = await testKeygate();
    expect((await k.req('GET', '/console/api/apikeys/session')).status).toBe(401);
    const forged = { cookie: `keygate_session=${'x'.repeat(43)}` };
    expect((await k.req('GET', '/console/api/apikeys/session', { headers: forged })).status).toBe(401);
  });

  it('tells the page its rules: the level within the policy, and what the user may grant', async () => {
    k = await testKeygate();
    await k.req('PUT', '/admin/users/42/policy', {
      headers: await k.operator(),
      body: { ratelimit: null, credits: null, maxKeys: null, maxLevel: 4, permissions: ['docs.*'] },
    });
    const session = await consoleSession(k, { sub: 42, level: 6 });
    const me = await k.req('GET', '/console/api/session', { headers: session.read });
    expect(me.json.rules).toEqual({
      maxLevel: 4,
      permissions: ['docs.*'],
      maxExpiresInSeconds: 315360000,
      userIds: 'numeric',
    });
    expect(me.json.session.csrfToken).toBe(session.csrf);
  });
});

describe('CSRF and Origin', () => {
  const CHANGES: Array<[string, string, (key: string) => string, unknown]> = [
    ['create', 'POST', () => '/console/api/apikeys/session', NEW_KEY],
    ['update', 'PATCH', (key) => `/console/api/apikeys/${key}/session`, { enabled: false }],
    ['rotate', 'POST', (key) => `/console/api/apikeys/${key}/rotate/session`, {}],
    ['delete', 'DELETE', (key) => `/console/api/apikeys/${key}/session`, undefined],
  ];

  it.each(CHANGES)(
    '%s is refused without the CSRF token, with a wrong one, or from another origin',
    async (_name, method, path, body) => {
      k = await testKeygate();
      const session = await consoleSession(k, { sub: 42 });
      const key = await k.createKey(42, { level: 1 });
      const refusals: Record<string, string>[] = [
        { cookie: session.cookie, origin: ORIGIN },
        {
          ...session.change,
          'x-keygate-csrf': `${session.csrf.slice(0, -1)}${session.csrf.endsWith('A') ? 'B' : 'A'}`,
        },
        { ...session.change, origin: 'https://evil.example' },
        { cookie: session.cookie, 'x-keygate-csrf': session.csrf },
      ];
      for (const headers of refusals) {
        const answer = await k.req(method, path(key.key), { headers, body });
        expect(answer.status).toBe(403);
      }
      // Nothing changed.
      const listed = await k.req('GET', '/console/api/apikeys/session', { headers: session.read });
      expect(listed.json.apikeys).toEqual([expect.objectContaining({ key: key.key, enabled: true })]);
      const done = await k.req(method, path(key.key), { headers: session.change, body });
      expect(done.status).toBeLessThan(300);
    },
  );

  it("another session's CSRF token does not do", async () => {
    k = await testKeygate();
    const mine = await consoleSession(k, { sub: 42 });
    const other = await consoleSession(k, { sub: 42 });
    const answer = await k.req('POST', '/console/api/apikeys/session', {
      headers: { ...mine.change, 'x-keygate-csrf': other.csrf },
      body: NEW_KEY,
    });
    expect(answer.status).toBe(403);
  });

  it("with PUBLIC_URL the Origin must be PUBLIC_URL's, whatever the Host", async () => {
    k = await testKeygate({ PUBLIC_URL: 'https://keys.example.com' });
    const link = await k.req('POST', '/apikeys/sessions/jwt', { headers: await k.bearer(42) });
    expect((await exchange(k, link.json.url, ORIGIN)).status).toBe(403);
    const opened = await exchange(k, link.json.url, 'https://keys.example.com');
    const cookie = (opened.headers.get('set-cookie') as string).split(';')[0] as string;
    const headers = { cookie, 'x-keygate-csrf': opened.json.session.csrfToken };
    const fromHost = await k.req('POST', '/console/api/apikeys/session', {
      headers: { ...headers, origin: ORIGIN },
      body: NEW_KEY,
    });
    expect(fromHost.status).toBe(403);
    const fromPublic = await k.req('POST', '/console/api/apikeys/session', {
      headers: { ...headers, origin: 'https://keys.example.com' },
      body: NEW_KEY,
    });
    expect(fromPublic.status).toBe(201);
  });
});

describe("a user's session acts as a token of that user", () => {
  it("never reaches another user's keys: 404 for each, and lists only its own", async () => {
    k = await testKeygate();
    const session = await consoleSession(k, { sub: 42 });
    const own = await k.createKey(42, { name: 'own' });
    const other = await k.createKey(43, { name: 'other' });
    const list = await k.req('GET', '/console/api/apikeys/session', { headers: session.read });
    expect(list.json.apikeys.map((key: { key: string }) => key.key)).toEqual([own.key]);
    const attempts: Array<[string, string, Record<string, string>, unknown]> = [
      ['GET', `/console/api/apikeys/${other.key}/session`, session.read, undefined],
      ['GET', `/console/api/apikeys/${other.key}/usage/session`, session.read, undefined],
      ['PATCH', `/console/api/apikeys/${other.key}/session`, session.change, { enabled: false }],
      ['POST', `/console/api/apikeys/${other.key}/rotate/session`, session.change, {}],
      ['DELETE', `/console/api/apikeys/${other.key}/session`, session.change, undefined],
    ];
    for (const [method, path, headers, body] of attempts) {
      expect((await k.req(method, path, { headers, body })).status).toBe(404);
    }
    const theirs = await k.req('GET', `/apikeys/${other.key}/jwt`, { headers: await k.bearer(43) });
    expect(theirs.json.apikey).toMatchObject({ enabled: true, name: 'other' });
  });

  it("is bounded by the session's level, as the token's was, and audited as the token's subject", async () => {
    k = await testKeygate();
    const session = await consoleSession(k, { sub: 42, level: 3 });
    const high = await k.createKey(42, { level: 5 });
    const tooHigh = await k.req('POST', '/console/api/apikeys/session', {
      headers: session.change,
      body: { ...NEW_KEY, level: 4 },
    });
    expect(tooHigh.status).toBe(403);
    expect(
      (await k.req('GET', `/console/api/apikeys/${high.key}/session`, { headers: session.read })).status,
    ).toBe(403);
    const created = await k.req('POST', '/console/api/apikeys/session', {
      headers: session.change,
      body: NEW_KEY,
    });
    expect(created.status).toBe(201);
    expect(k.logLines('apikey.created').at(-1)).toMatchObject({
      key: created.json.apikey.key,
      userId: 42,
      by: 'jwt:42',
    });
  });

  it("the user's policy binds what it grants (permissions outside it: 403)", async () => {
    k = await testKeygate();
    await k.req('PUT', '/admin/users/42/policy', {
      headers: await k.operator(),
      body: { ratelimit: null, credits: null, maxKeys: null, maxLevel: null, permissions: ['docs.*'] },
    });
    const session = await consoleSession(k, { sub: 42 });
    const outside = await k.req('POST', '/console/api/apikeys/session', {
      headers: session.change,
      body: { ...NEW_KEY, permissions: ['billing.read'] },
    });
    expect(outside.status).toBe(403);
    const inside = await k.req('POST', '/console/api/apikeys/session', {
      headers: session.change,
      body: { ...NEW_KEY, permissions: ['docs.read'] },
    });
    expect(inside.status).toBe(201);
  });

  it("cannot use the operator's routes; the operator's session cannot use the owner's", async () => {
    k = await testKeygate();
    const user = await consoleSession(k, { sub: 42 });
    const operator = await consoleSession(k, { operator: true });
    expect((await k.req('GET', '/console/api/admin/users/42/apikeys', { headers: user.read })).status).toBe(
      403,
    );
    expect((await k.req('GET', '/console/api/apikeys/session', { headers: operator.read })).status).toBe(403);
    expect(operator.opened.json.session).toMatchObject({ kind: 'operator', userId: null, by: 'admin:ops' });
    // What the operator's page offers comes from here too: any level, any permission.
    expect(operator.opened.json.rules).toMatchObject({ maxLevel: 8, permissions: null });
  });
});

describe("the operator's session", () => {
  it("acts on any user's keys through the operator's routes, audited as the operator", async () => {
    k = await testKeygate();
    const operator = await consoleSession(k, { operator: true });
    const created = await k.req('POST', '/console/api/admin/users/42/apikeys', {
      headers: operator.change,
      body: { ...NEW_KEY, level: 8 },
    });
    expect(created.status).toBe(201);
    expect(k.logLines('apikey.created').at(-1)).toMatchObject({ userId: 42, by: 'admin:ops' });
    const refused = await k.req('POST', '/console/api/admin/users/42/apikeys', {
      headers: operator.read,
      body: NEW_KEY,
    });
    expect(refused.status).toBe(403);
    const revoked = await k.req('DELETE', '/console/api/admin/users/42/apikeys', {
      headers: operator.change,
    });
    expect(revoked.json).toEqual({ result: 'success', deleted: 1 });
  });
});

describe("the operator's session acting for a user", () => {
  it("has every owner's action on that user's keys, rotate included; another user's key is 404", async () => {
    k = await testKeygate();
    const operator = await consoleSession(k, { operator: true });
    const key = await k.createKey(42, { level: 8 });
    const for42 = { 'x-keygate-acting-for': '42' };
    const listed = await k.req('GET', '/console/api/operator/apikeys/session', {
      headers: { ...operator.read, ...for42 },
    });
    expect(listed.json.apikeys.map((item: { key: string }) => item.key)).toEqual([key.key]);
    const elsewhere = await k.req('POST', `/console/api/operator/apikeys/${key.key}/rotate/session`, {
      headers: { ...operator.change, 'x-keygate-acting-for': '43' },
      body: {},
    });
    expect(elsewhere.status).toBe(404);
    const rotated = await k.req('POST', `/console/api/operator/apikeys/${key.key}/rotate/session`, {
      headers: { ...operator.change, ...for42 },
      body: { gracePeriod: 3600 },
    });
    expect(rotated.status).toBe(201);
    expect(k.logLines('apikey.rotated').at(-1)).toMatchObject({
      previousKey: key.key,
      userId: 42,
      by: 'admin:ops',
    });
    const old = await k.req('GET', `/console/api/operator/apikeys/${key.key}/session`, {
      headers: { ...operator.read, ...for42 },
    });
    expect(old.json.apikey.retiring).toBe(true);
    const user = await consoleSession(k, { sub: 42 });
    const refused = await k.req('GET', '/console/api/operator/apikeys/session', {
      headers: { ...user.read, ...for42 },
    });
    expect(refused.status).toBe(403);
    const unnamed = await k.req('GET', '/console/api/operator/apikeys/session', { headers: operator.read });
    expect(unnamed.status).toBe(400);
  });
});

describe('the page and its headers', () => {
  const CSP =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

  it('every console answer carries the strict CSP, errors included', async () => {
    k = await testKeygate();
    for (const path of [
      '/console',
      '/console?from=app',
      '/console/app.js',
      '/console/app.css',
      '/console/theme.css',
      '/console/api/session',
      '/console/nothing',
    ]) {
      const answer = await k.req('GET', path);
      expect(answer.headers.get('content-security-policy'), path).toBe(CSP);
      expect(answer.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
  });

  it('CONSOLE_FRAME_ANCESTORS, CONSOLE_TITLE (escaped) and CONSOLE_ACCENT reach the page', async () => {
    k = await testKeygate({
      CONSOLE_FRAME_ANCESTORS: "'self' https://app.example.com",
      CONSOLE_TITLE: 'Acme <keys> & "more"',
      CONSOLE_ACCENT: '#ff0066',
    });
    const page = await k.req('GET', '/console');
    expect(page.headers.get('content-security-policy')).toContain(
      "frame-ancestors 'self' https://app.example.com;",
    );
    expect(page.text).toContain('<title>Acme &#60;keys&#62; &#38; &#34;more&#34;</title>');
    expect(page.text).not.toContain('<keys>');
    expect(page.text).not.toMatch(/<script>|<style|style=/);
    expect((await k.req('GET', '/console/theme.css')).text).toBe(':root { --accent: #ff0066; }\n');
  });

  it('serves the bundle gzipped to a browser that takes it', async () => {
    k = await testKeygate();
    const plain = await k.req('GET', '/console/app.js');
    expect(plain.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    const response = await k.keygate.handle(
      new Request('http://localhost/console/app.js', { headers: { 'accept-encoding': 'gzip, br' } }),
    );
    expect(response.headers.get('content-encoding')).toBe('gzip');
    expect(new TextDecoder().decode(Bun.gunzipSync(new Uint8Array(await response.arrayBuffer())))).toBe(
      plain.text,
    );
  });

  it('CONSOLE=off: every console path and both link routes are 404', async () => {
    k = await testKeygate({ CONSOLE: 'off' });
    const paths: Array<[string, string, Record<string, string>]> = [
      ['GET', '/console', {}],
      ['GET', '/console/app.js', {}],
      ['GET', '/console/theme.css', {}],
      ['GET', '/console/api/session', {}],
      ['POST', '/console/api/session', { origin: ORIGIN }],
      ['GET', '/console/api/apikeys/session', {}],
      ['POST', '/apikeys/sessions/jwt', await k.bearer(42)],
      ['POST', '/admin/sessions', await k.operator()],
    ];
    for (const [method, path, headers] of paths) {
      const answer = await k.req(method, path, {
        headers,
        body: method === 'POST' ? { operator: true } : undefined,
      });
      expect(answer.status, `${method} ${path}`).toBe(404);
    }
    const doc = await k.req('GET', '/openapi/json');
    expect(Object.keys(doc.json.paths).filter((path) => path.includes('session'))).toEqual([]);
  });
});
