// LOG_LEVEL=debug: the request's log line says why a token was refused, on every path that takes a
// token, and never carries the token. Other levels leave the line as it was.
import { afterEach, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
afterEach(() => k.close());

const requestLine = () => k.logLines('request').at(-1);

describe('tokenRefusal on the request line', () => {
  it('names the reason on /jwt, verify and forward-auth at debug, and never the token', async () => {
    k = await testKeygate({ LOG_LEVEL: 'debug' });
    const expired = await k.token(42, { ttlSeconds: 60 });
    k.time.now += 60_000;
    const bearer = { authorization: `Bearer ${expired}` };

    await k.req('POST', '/apikeys/jwt', { headers: bearer, body: { name: 'x', level: 1, expiresIn: 60 } });
    expect(requestLine()).toMatchObject({ path: '/apikeys/jwt', status: 403, tokenRefusal: 'expired' });
    await k.req('POST', '/apikeys/verify', { body: { token: expired } });
    expect(requestLine()).toMatchObject({ path: '/apikeys/verify', status: 200, tokenRefusal: 'expired' });
    await k.req('GET', '/forward-auth', { headers: bearer });
    expect(requestLine()).toMatchObject({ path: '/forward-auth', status: 403, tokenRefusal: 'expired' });

    const tampered = `${expired.slice(0, -3)}${expired.endsWith('AAA') ? 'BAA' : 'AAA'}`;
    await k.req('GET', '/apikeys/jwt', { headers: { authorization: `Bearer ${tampered}` } });
    expect(requestLine()).toMatchObject({ status: 403, tokenRefusal: 'bad-signature' });

    const logged = JSON.stringify(k.logLines());
    for (const segment of [...expired.split('.'), ...tampered.split('.')])
      expect(logged).not.toContain(segment);
  });

  it('is absent when the token is fine, and at the info level', async () => {
    k = await testKeygate({ LOG_LEVEL: 'debug' });
    await k.req('GET', '/apikeys/jwt', { headers: await k.bearer(1) });
    expect(requestLine()).toMatchObject({ status: 200 });
    expect(requestLine()).not.toHaveProperty('tokenRefusal');
    await k.close();

    k = await testKeygate({ LOG_LEVEL: 'info' });
    await k.req('GET', '/apikeys/jwt', { headers: { authorization: 'Bearer a.b.c' } });
    expect(requestLine()).toMatchObject({ status: 403 });
    expect(requestLine()).not.toHaveProperty('tokenRefusal');
  });
});
