// The console adds nothing to a verification: with CONSOLE=on, verify and forward-auth never ask the
// sessions (no cookie is read, no session looked up) and carry none of the console's headers, so a
// verification costs what it costs with CONSOLE=off.
import { afterAll, beforeAll, describe, expect, it, spyOn } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeAll(async () => {
  k = await testKeygate({ CONSOLE: 'on' });
});
afterAll(() => k.close());

describe('a verification with the console on', () => {
  it('asks no session and answers without the console headers', async () => {
    const key = await k.createKey(3);
    const { sessions } = k.keygate;
    const asked = (['sessionOf', 'exchange', 'logout', 'csrfTokenOf', 'issueLink'] as const).map((name) =>
      spyOn(sessions, name),
    );
    const cookie = { cookie: 'keygate_session=anything' };
    for (let i = 0; i < 50; i++) {
      const verified = await k.req('POST', '/apikeys/verify', {
        headers: cookie,
        body: { key: key.key, secret: key.secret },
      });
      expect(verified.json.code).toBe('VALID');
      expect(verified.headers.has('content-security-policy')).toBe(false);
      const allowed = await k.req('GET', '/forward-auth', {
        headers: { ...cookie, ...k.basic(key.key, key.secret) },
      });
      expect(allowed.status).toBe(200);
      expect(allowed.headers.has('content-security-policy')).toBe(false);
    }
    for (const spy of asked) expect(spy).not.toHaveBeenCalled();
  });
});
