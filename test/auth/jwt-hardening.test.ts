// Tokens an adversarial probe found accepted: infinite or far-off `exp`, future `iat`, and segments
// that are not canonical base64url. Each is refused with its reason, by a fresh verification and by
// the verified-token cache alike. Payloads are written as raw JSON text (1e400 has no JS number).
import { describe, expect, it } from 'bun:test';
import { createHmac } from 'node:crypto';
import { createJwtAuthority, type TokenRefusal } from '../../src/auth/jwt';

const SECRET = 'hardening-test-secret-that-is-32-bytes+';
const start = Date.parse('2026-01-01T00:00:00Z');
const nowS = start / 1000;
/** 9999-12-31T23:59:59Z: the latest `exp` a token may carry. */
const LATEST = Date.parse('9999-12-31T23:59:59Z') / 1000;

function authority(options: { clockToleranceSeconds?: number } = {}) {
  const time = { now: start };
  const jwt = createJwtAuthority({ secret: SECRET, clock: () => time.now, ...options });
  return { jwt, time };
}

const b64 = (text: string) => Buffer.from(text).toString('base64url');

/** An HS256 token over exactly this payload text. */
function rawToken(payload: string, header = '{"alg":"HS256","typ":"JWT"}'): string {
  const signingInput = `${b64(header)}.${b64(payload)}`;
  return `${signingInput}.${createHmac('sha256', SECRET).update(signingInput).digest('base64url')}`;
}

describe('time claims', () => {
  it.each<[string, string, TokenRefusal | 'ok']>([
    ['exp 1e400 (parses to Infinity)', `{"sub":"1","exp":1e400}`, 'exp-too-far'],
    ['exp 1e300', `{"sub":"1","exp":1e300}`, 'exp-too-far'],
    ['exp one second past 9999-12-31T23:59:59Z', `{"sub":"1","exp":${LATEST + 1}}`, 'exp-too-far'],
    ['exp 9999-12-31T23:59:59Z exactly', `{"sub":"1","exp":${LATEST}}`, 'ok'],
    ['exp ten years and a day ahead (past any key cap)', `{"sub":"1","exp":${nowS + 315_446_400}}`, 'ok'],
    ['exp -1e400', `{"sub":"1","exp":-1e400}`, 'expired'],
    ['exp as a string', `{"sub":"1","exp":"${nowS + 60}"}`, 'claims'],
    ['exp now (expired)', `{"sub":"1","exp":${nowS}}`, 'expired'],
    ['iat one second ahead', `{"sub":"1","exp":${nowS + 60},"iat":${nowS + 1}}`, 'issued-in-future'],
    ['iat 1e400', `{"sub":"1","exp":${nowS + 60},"iat":1e400}`, 'issued-in-future'],
    ['iat -1e400', `{"sub":"1","exp":${nowS + 60},"iat":-1e400}`, 'issued-in-future'],
    ['iat now', `{"sub":"1","exp":${nowS + 60},"iat":${nowS}}`, 'ok'],
    ['nbf one second ahead', `{"sub":"1","exp":${nowS + 60},"nbf":${nowS + 1}}`, 'not-yet-valid'],
    ['nbf 1e400', `{"sub":"1","exp":${nowS + 60},"nbf":1e400}`, 'not-yet-valid'],
    ['sub negative', `{"sub":-1,"exp":${nowS + 60}}`, 'claims'],
  ])('%s → %s', async (_, payload, expected) => {
    const check = await authority().jwt.verify(rawToken(payload));
    if (expected === 'ok') expect(check).toMatchObject({ ok: true });
    else expect(check).toEqual({ ok: false, reason: expected });
  });

  it.each<[string, string, number, boolean]>([
    ['exp 10 s ago, tolerance 10', `"exp":${nowS - 10}`, 10, false],
    ['exp 9 s ago, tolerance 10', `"exp":${nowS - 9}`, 10, true],
    ['iat 10 s ahead, tolerance 10', `"exp":${nowS + 60},"iat":${nowS + 10}`, 10, true],
    ['iat 11 s ahead, tolerance 10', `"exp":${nowS + 60},"iat":${nowS + 11}`, 10, false],
    ['nbf 10 s ahead, tolerance 10', `"exp":${nowS + 60},"nbf":${nowS + 10}`, 10, true],
    ['nbf 11 s ahead, tolerance 10', `"exp":${nowS + 60},"nbf":${nowS + 11}`, 10, false],
    ['iat 1 s ahead, tolerance 0', `"exp":${nowS + 60},"iat":${nowS + 1}`, 0, false],
  ])('%s → accepted: %p', async (_, claims, clockToleranceSeconds, accepted) => {
    const check = await authority({ clockToleranceSeconds }).jwt.verify(rawToken(`{"sub":"1",${claims}}`));
    expect(check.ok).toBe(accepted);
  });
});

describe('the verified-token cache re-runs every time check', () => {
  it.each<[string, string, number, TokenRefusal]>([
    ['iat, when the clock moves back', `"exp":${nowS + 60},"iat":${nowS}`, -1000, 'issued-in-future'],
    ['nbf, when the clock moves back', `"exp":${nowS + 60},"nbf":${nowS}`, -1000, 'not-yet-valid'],
    ['exp, when the clock reaches it', `"exp":${nowS + 60}`, 60_000, 'expired'],
  ])('%s', async (_, claims, move, reason) => {
    const { jwt, time } = authority();
    const token = rawToken(`{"sub":"1",${claims}}`);
    expect(await jwt.verify(token)).toMatchObject({ ok: true });
    expect(await jwt.verify(token)).toMatchObject({ ok: true }); // from the cache
    time.now += move;
    expect(await jwt.verify(token)).toEqual({ ok: false, reason });
    time.now -= move;
    expect(await jwt.verify(token)).toMatchObject({ ok: true });
  });

  it('keeps the tolerance on a cache hit too', async () => {
    const { jwt, time } = authority({ clockToleranceSeconds: 5 });
    const token = rawToken(`{"sub":"1","exp":${nowS + 60},"iat":${nowS + 5}}`);
    expect(await jwt.verify(token)).toMatchObject({ ok: true });
    time.now -= 1000;
    expect(await jwt.verify(token)).toEqual({ ok: false, reason: 'issued-in-future' });
  });
});

describe('canonical base64url', () => {
  const token = rawToken(`{"sub":"1","exp":${nowS + 60}}`);
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

  it('accepts exactly one spelling of the signature: its 43rd character carries 2 unused bits', async () => {
    const { jwt } = authority();
    const body = signature.slice(0, -1);
    const outcomes = new Map<string, string[]>();
    for (const last of ALPHABET) {
      const check = await jwt.verify(`${header}.${payload}.${body}${last}`);
      const outcome = check.ok ? 'ok' : check.reason;
      outcomes.set(outcome, [...(outcomes.get(outcome) ?? []), last]);
    }
    // 64 last characters: 16 with the 2 unused bits at zero (one right, 15 a different signature),
    // 48 with stray bits, refused before the signature is checked.
    expect(outcomes.get('ok')).toEqual([signature.slice(-1)]);
    expect(outcomes.get('bad-signature')).toHaveLength(15);
    expect(outcomes.get('malformed')).toHaveLength(48);
    expect(outcomes.size).toBe(3);
  });

  it.each([
    ['a trailing = on the signature', `${header}.${payload}.${signature}=`],
    ['padding == on the signature', `${header}.${payload}.${signature}==`],
    [
      'standard base64 + / in the signature',
      `${header}.${payload}.${signature.replaceAll('-', '+').replaceAll('_', '/')}+/`,
    ],
    ['a space in the signature', `${header}.${payload}.${signature.slice(0, 10)} ${signature.slice(10)}`],
    ['a trailing = on the payload', `${header}.${payload}=.${signature}`],
    ['a trailing = on the header', `${header}=.${payload}.${signature}`],
    ['four segments', `${token}.x`],
    ['two segments', `${header}.${payload}`],
  ])('refuses %s as malformed', async (_, variant) => {
    expect(await authority().jwt.verify(variant)).toEqual({ ok: false, reason: 'malformed' });
  });

  it('refuses a payload whose last character has stray low bits, even though it decodes the same', async () => {
    const { jwt } = authority();
    const decoded = Buffer.from(payload, 'base64url');
    const strays = [...ALPHABET]
      .map((last) => `${payload.slice(0, -1)}${last}`)
      .filter((variant) => variant !== payload && Buffer.from(variant, 'base64url').equals(decoded));
    // Only meaningful when the payload's length leaves unused bits; this one does.
    expect(payload.length % 4).not.toBe(0);
    expect(strays.length).toBeGreaterThan(0);
    for (const variant of strays) {
      expect(await jwt.verify(`${header}.${variant}.${signature}`)).toEqual({
        ok: false,
        reason: 'malformed',
      });
    }
  });
});

describe('refusal reasons', () => {
  it.each<[string, () => string, TokenRefusal]>([
    [
      'bad signature',
      () => `${rawToken(`{"sub":"1","exp":${nowS + 60}}`).slice(0, -4)}AAAA`,
      'bad-signature',
    ],
    ['HS384', () => rawToken(`{"sub":"1","exp":${nowS + 60}}`, '{"alg":"HS384"}'), 'algorithm-not-allowed'],
    [
      'alg none',
      () => `${b64('{"alg":"none"}')}.${b64(`{"sub":"1","exp":${nowS + 60}}`)}.`,
      'algorithm-not-allowed',
    ],
    ['not JSON', () => rawToken('not json'), 'malformed'],
    ['garbage', () => 'a.b.c', 'malformed'],
    ['no sub', () => rawToken(`{"exp":${nowS + 60}}`), 'claims'],
  ])('%s → %s', async (_, make, reason) => {
    expect(await authority().jwt.verify(make())).toEqual({ ok: false, reason });
  });

  it('tells a wrong issuer and a wrong audience apart', async () => {
    const time = { now: start };
    const strict = createJwtAuthority({ secret: SECRET, issuer: 'i', audience: 'a', clock: () => time.now });
    const claims = (extra: string) => rawToken(`{"sub":"1","exp":${nowS + 60},${extra}}`);
    expect(await strict.verify(claims('"iss":"x","aud":"a"'))).toEqual({ ok: false, reason: 'wrong-issuer' });
    expect(await strict.verify(claims('"iss":"i","aud":"x"'))).toEqual({
      ok: false,
      reason: 'wrong-audience',
    });
    expect(await strict.verify(claims('"iss":"i","aud":"a"'))).toMatchObject({ ok: true });
  });
});
