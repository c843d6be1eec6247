// POST /admin/leaks: secrets found by any scanner, reported by the operator. The admin credential
// before the body; the body's bounds (1..100 secrets, an optional source); found keys get
// LEAK_ACTION, the others are counted in notFound; the audit line names the operator and the source.
import { afterEach, beforeEach, describe, expect, it, spyOn } from 'bun:test';
import { generateSecret } from '../../src/apikeys/secrets';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
});
afterEach(() => k.close());

const report = async (body: unknown, headers?: Record<string, string>) =>
  k.req('POST', '/admin/leaks', { headers: headers ?? (await k.operator()), body });

const verifyCode = async (key: { key: string; secret: string }) =>
  (await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } })).json.code;

describe('POST /admin/leaks', () => {
  it('needs the operator’s token, before the body is read', async () => {
    const key = await k.createKey(42);
    const body = { secrets: [key.secret] };
    const none = await k.req('POST', '/admin/leaks', { body });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toContain('Bearer');
    expect((await report(body, k.basic(key.key, key.secret))).status).toBe(401);
    expect((await report(body, await k.bearer(42))).status).toBe(403);
    expect((await k.postTellingIfRead('/admin/leaks', {}, body)).read).toBe(false);
    expect(await verifyCode(key)).toBe('VALID');
  });

  it.each([
    ['no body', undefined],
    ['an array', [generateSecret()]],
    ['no secrets', { source: 'gitleaks' }],
    ['an empty list', { secrets: [] }],
    ['101 secrets', { secrets: Array.from({ length: 101 }, () => generateSecret()) }],
    ['a secret that is not a string', { secrets: [42] }],
    ['an empty secret', { secrets: [''] }],
    ['a secret of 257 characters', { secrets: ['x'.repeat(257)] }],
    ['an empty source', { secrets: [generateSecret()], source: '' }],
    ['a source with a newline', { secrets: [generateSecret()], source: 'git\nleaks' }],
    ['a source of 101 characters', { secrets: [generateSecret()], source: 's'.repeat(101) }],
    ['another property', { secrets: [generateSecret()], url: 'https://example.com' }],
  ])('answers 400 for %s', async (_, body) => {
    const response = await report(body);
    expect(response.status).toBe(400);
    expect(response.json).toEqual({ result: 'error', error: expect.any(String) });
  });

  it('takes 100 secrets; disables the live keys among them, each once, counts the others once each', async () => {
    const first = await k.createKey(42);
    const second = await k.createKey(7);
    const untouched = await k.createKey(42);
    const unknown = Array.from({ length: 94 }, () => generateSecret());
    const wrongChecksum = `${first.secret.slice(0, -1)}${first.secret.endsWith('0') ? '1' : '0'}`;
    const secrets = [
      first.secret,
      first.secret, // given twice: found once
      ...unknown,
      wrongChecksum,
      second.secret,
      'not-a-secret',
      unknown[0] as string,
    ];
    expect(secrets).toHaveLength(100);
    const response = await report({ secrets, source: 'gitleaks' });
    expect(response.status).toBe(200);
    expect(response.json).toEqual({
      result: 'success',
      found: [
        { key: first.key, action: 'disabled' },
        { key: second.key, action: 'disabled' },
      ],
      notFound: 96, // 94 unknown, the wrong checksum, not-a-secret; the repeated one counted once
    });
    expect(await verifyCode(first)).toBe('DISABLED');
    expect(await verifyCode(second)).toBe('DISABLED');
    expect(await verifyCode(untouched)).toBe('VALID');
    expect(k.logLines('apikey.leaked')).toEqual([
      expect.objectContaining({ key: first.key, userId: 42, source: 'gitleaks', url: null, by: 'admin:ops' }),
      expect.objectContaining({ key: second.key, userId: 7, source: 'gitleaks', url: null, by: 'admin:ops' }),
    ]);
    const info = await k.req('GET', `/admin/apikeys/${first.key}`, { headers: await k.operator() });
    expect(info.json.apikey).toMatchObject({ enabled: false, leakSource: 'gitleaks' });
    expect(info.json.apikey.leakedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('keeps the first report’s time and source when a secret is reported again', async () => {
    const key = await k.createKey(42);
    await report({ secrets: [key.secret], source: 'gitleaks' });
    const firstAt = (await k.req('GET', `/admin/apikeys/${key.key}`, { headers: await k.operator() })).json
      .apikey.leakedAt;
    k.time.now += 60_000;
    const again = await report({ secrets: [key.secret], source: 'trufflehog' });
    expect(again.json.found).toEqual([{ key: key.key, action: 'disabled' }]);
    const info = await k.req('GET', `/admin/apikeys/${key.key}`, { headers: await k.operator() });
    expect(info.json.apikey).toMatchObject({ leakedAt: firstAt, leakSource: 'gitleaks' });
    expect(k.logLines('apikey.leaked')).toHaveLength(2);
  });

  it('defaults the source to admin; a wrong checksum asks the database nothing', async () => {
    const key = await k.createKey(42);
    const lookup = spyOn(k.keygate.store, 'findKeysBySecretHashes');
    const wrong = `${key.secret.slice(0, -1)}${key.secret.endsWith('0') ? '1' : '0'}`;
    expect((await report({ secrets: [wrong] })).json).toEqual({ result: 'success', found: [], notFound: 1 });
    expect(lookup).not.toHaveBeenCalled();
    await report({ secrets: [key.secret] });
    expect(k.logLines('apikey.leaked')).toEqual([expect.objectContaining({ source: 'admin' })]);
  });
});

describe('LEAK_ACTION on /admin/leaks', () => {
  it.each([
    ['delete', 'deleted', 'NOT_FOUND'],
    ['notify', 'notified', 'VALID'],
  ])('%s: the key is %s', async (action, outcome, code) => {
    const local = await testKeygate({ LEAK_ACTION: action });
    try {
      const key = await local.createKey(42);
      const response = await local.req('POST', '/admin/leaks', {
        headers: await local.operator(),
        body: { secrets: [key.secret] },
      });
      expect(response.json).toEqual({
        result: 'success',
        found: [{ key: key.key, action: outcome }],
        notFound: 0,
      });
      const verify = await local.req('POST', '/apikeys/verify', {
        body: { key: key.key, secret: key.secret },
      });
      expect(verify.json.code).toBe(code);
    } finally {
      await local.close();
    }
  });
});
