// GitHub's secret scanning alerts (POST /leaks/github): only when GITHUB_SECRET_SCANNING=on; the
// signature checked over the raw body against the keys a local stand-in for GitHub serves (an
// unknown key id refetched once, the cached keys used while the URL fails); each LEAK_ACTION; the
// feedback labels; secrets of another prefix; a wrong checksum that asks the database nothing.
import { afterAll, afterEach, describe, expect, it, spyOn } from 'bun:test';
import { generateKeyId, generateSecret, hashSecret } from '../../src/apikeys/secrets';
import {
  type GithubKeysServer,
  newSigningKey,
  signedHeaders,
  startGithubKeysServer,
} from '../support/github-keys';
import { START, type TestKeygate, testKeygate } from '../support/keygate';

const github: GithubKeysServer = startGithubKeysServer();
afterAll(() => github.stop());

let k: TestKeygate | undefined;
afterEach(async () => {
  await k?.close();
  k = undefined;
  github.state.failing = false;
  github.state.keys = github.state.keys.slice(0, 1);
});

async function scanning(env: Record<string, string> = {}) {
  k = await testKeygate({
    GITHUB_SECRET_SCANNING: 'on',
    GITHUB_SECRET_SCANNING_KEYS_URL: github.url,
    ...env,
  });
  return k;
}

const alert = (token: string, url = 'https://github.com/acme/app/blob/abc/config.env') => ({
  token,
  type: 'keygate_secret',
  url,
  source: 'content',
});

/** Posts `alerts` as GitHub does: the body signed with `key` (default: the first key served). */
function postAlerts(
  kg: TestKeygate,
  alerts: unknown,
  key = github.state.keys[0] as ReturnType<typeof newSigningKey>,
) {
  const body = JSON.stringify(alerts);
  return kg.req('POST', '/leaks/github', { headers: signedHeaders(body, key), body });
}

const verifyCode = async (kg: TestKeygate, key: { key: string; secret: string }) =>
  (await kg.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } })).json.code;

/** A secret of the kgs_ shape whose checksum is wrong. */
const withBadChecksum = (secret: string) => `${secret.slice(0, -1)}${secret.endsWith('0') ? '1' : '0'}`;

describe('POST /leaks/github', () => {
  it('is an unknown path unless GITHUB_SECRET_SCANNING=on', async () => {
    k = await testKeygate();
    const response = await postAlerts(k, [alert(generateSecret())]);
    expect(response.status).toBe(404);
    expect(response.json).toEqual({ result: 'error', error: 'There is no POST /leaks/github.' });
  });

  it('answers 401 without a signature, or with a wrong one, and changes nothing', async () => {
    const kg = await scanning();
    const key = await kg.createKey(42);
    const body = JSON.stringify([alert(key.secret)]);

    const unsigned = await kg.req('POST', '/leaks/github', { body });
    expect(unsigned.status).toBe(401);
    expect(unsigned.headers.get('www-authenticate')).toContain('Github-Public-Key-Signature');
    const onlyId = await kg.req('POST', '/leaks/github', {
      headers: { 'github-public-key-identifier': github.state.keys[0]?.id as string },
      body,
    });
    expect(onlyId.status).toBe(401);

    // Signed, but over another body; then a signature that is not base64 DER at all.
    const other = signedHeaders(JSON.stringify([alert(generateSecret())]), github.state.keys[0] as never);
    const wrong = await kg.req('POST', '/leaks/github', { headers: other, body });
    expect(wrong.status).toBe(401);
    expect(wrong.json).toEqual({ result: 'error', error: 'The signature does not match the body.' });
    const garbage = await kg.req('POST', '/leaks/github', {
      headers: { ...other, 'github-public-key-signature': 'bm90IGEgc2lnbmF0dXJl' },
      body,
    });
    expect(garbage.status).toBe(401);
    // Signed by a key GitHub does not list.
    const stranger = await postAlerts(kg, [alert(key.secret)], newSigningKey());
    expect(stranger.status).toBe(401);

    expect(await verifyCode(kg, key)).toBe('VALID');
    expect(kg.logLines('apikey.leaked')).toEqual([]);
  });

  it('disables the key of a reported secret (the default), marks it leaked and answers the feedback labels', async () => {
    const kg = await scanning();
    const leaked = await kg.createKey(42, { name: 'leaked' });
    const safe = await kg.createKey(42, { name: 'safe' });
    const unknown = generateSecret();
    const response = await postAlerts(kg, [alert(leaked.secret), alert(unknown), alert('not-a-secret')]);
    expect(response.status).toBe(200);
    expect(response.json).toEqual([
      { token_raw: leaked.secret, token_type: 'keygate_secret', label: 'true_positive' },
      { token_raw: unknown, token_type: 'keygate_secret', label: 'false_positive' },
      { token_raw: 'not-a-secret', token_type: 'keygate_secret', label: 'false_positive' },
    ]);

    expect(await verifyCode(kg, leaked)).toBe('DISABLED');
    expect(await verifyCode(kg, safe)).toBe('VALID');
    const info = await kg.req('GET', `/apikeys/${leaked.key}/jwt`, { headers: await kg.bearer(42) });
    expect(info.json.apikey).toMatchObject({
      enabled: false,
      leakedAt: new Date(START).toISOString(),
      leakSource: 'github:content',
    });
    const other = await kg.req('GET', `/apikeys/${safe.key}/jwt`, { headers: await kg.bearer(42) });
    expect(other.json.apikey.leakedAt).toBeUndefined();
    expect(kg.logLines('apikey.leaked')).toEqual([
      expect.objectContaining({
        key: leaked.key,
        userId: 42,
        source: 'github:content',
        url: 'https://github.com/acme/app/blob/abc/config.env',
        action: 'disabled',
        by: 'github',
      }),
    ]);
    expect(kg.logLines('apikey.updated')).toEqual([
      expect.objectContaining({ key: leaked.key, changed: ['enabled'], by: 'github' }),
    ]);
    // Never the secret, in any line.
    expect(kg.logLines().some((line) => JSON.stringify(line).includes(leaked.secret))).toBe(false);
  });

  it('LEAK_ACTION=delete deletes the key', async () => {
    const kg = await scanning({ LEAK_ACTION: 'delete' });
    const key = await kg.createKey(42);
    const response = await postAlerts(kg, [alert(key.secret)]);
    expect(response.json[0].label).toBe('true_positive');
    expect(await verifyCode(kg, key)).toBe('NOT_FOUND');
    expect(kg.logLines('apikey.leaked')).toEqual([
      expect.objectContaining({ key: key.key, action: 'deleted' }),
    ]);
    expect(kg.logLines('apikey.deleted')).toEqual([expect.objectContaining({ key: key.key, by: 'github' })]);
  });

  it('LEAK_ACTION=notify leaves the key working, marked leaked, with the audit line', async () => {
    const kg = await scanning({ LEAK_ACTION: 'notify' });
    const key = await kg.createKey(42);
    const response = await postAlerts(kg, [alert(key.secret)]);
    expect(response.json[0].label).toBe('true_positive');
    expect(await verifyCode(kg, key)).toBe('VALID');
    const info = await kg.req('GET', `/apikeys/${key.key}/jwt`, { headers: await kg.bearer(42) });
    expect(info.json.apikey).toMatchObject({ enabled: true, leakSource: 'github:content' });
    expect(kg.logLines('apikey.leaked')).toEqual([
      expect.objectContaining({ key: key.key, action: 'notified' }),
    ]);
    expect(kg.logLines('apikey.updated')).toEqual([]);
  });

  it('finds secrets of another prefix, old and new; an expired key’s secret is a false positive', async () => {
    const kg = await scanning({ SECRET_PREFIX: 'acme_' });
    const current = await kg.createKey(42);
    expect(current.secret).toStartWith('acme_');
    // Keys issued before: one under kgs_, one under another prefix, one expired.
    const stored = async (secret: string, expiresAt: number) => {
      const id = generateKeyId(START);
      await kg.keygate.store.insertKeyWithinLimit(
        {
          id,
          secretHash: hashSecret(secret),
          userId: 7,
          level: 1,
          name: 'old',
          createdAt: START - 1000,
          expiresAt,
        },
        1000,
      );
      return id;
    };
    const kgs = generateSecret();
    const beta = generateSecret('beta_');
    const gone = generateSecret();
    const kgsKey = await stored(kgs, START + 3_600_000);
    const betaKey = await stored(beta, START + 3_600_000);
    await stored(gone, START - 1);
    const response = await postAlerts(kg, [alert(current.secret), alert(kgs), alert(beta), alert(gone)]);
    expect(response.json.map((item: { label: string }) => item.label)).toEqual([
      'true_positive',
      'true_positive',
      'true_positive',
      'false_positive',
    ]);
    expect(await verifyCode(kg, { key: kgsKey, secret: kgs })).toBe('DISABLED');
    expect(await verifyCode(kg, { key: betaKey, secret: beta })).toBe('DISABLED');
  });

  it('answers a kgs_ secret with a wrong checksum false_positive without asking the database', async () => {
    const kg = await scanning();
    const key = await kg.createKey(42);
    const lookup = spyOn(kg.keygate.store, 'findKeysBySecretHashes');
    const response = await postAlerts(kg, [alert(withBadChecksum(key.secret))]);
    expect(response.json[0].label).toBe('false_positive');
    expect(lookup).not.toHaveBeenCalled();
    expect(await verifyCode(kg, key)).toBe('VALID');
  });

  it('takes a batch of 1,000 alerts (above the 16 KiB of keygate’s own bodies), acting on each secret once', async () => {
    const kg = await scanning();
    const key = await kg.createKey(42);
    const alerts = Array.from({ length: 999 }, (_, i) =>
      alert(generateSecret(), `https://github.com/acme/app/blob/${i}/a-rather-long-path/of/some/file.env`),
    );
    alerts.splice(500, 0, alert(key.secret));
    alerts.push(alert(key.secret)); // reported twice
    const body = JSON.stringify(alerts);
    expect(body.length).toBeGreaterThan(100_000);
    const response = await postAlerts(kg, alerts);
    expect(response.status).toBe(200);
    expect(response.json).toHaveLength(1001);
    expect(response.json.filter((item: { label: string }) => item.label === 'true_positive')).toHaveLength(2);
    expect(kg.logLines('apikey.leaked')).toHaveLength(1);
  });

  it('refuses a body over 1 MiB (413) and one that is not a list of alerts (400)', async () => {
    const kg = await scanning();
    const huge = await kg.req('POST', '/leaks/github', {
      headers: signedHeaders('x', github.state.keys[0] as never),
      body: 'x'.repeat(1024 * 1024 + 1),
    });
    expect(huge.status).toBe(413);
    const notAList = await postAlerts(kg, { token: generateSecret() });
    expect(notAList.status).toBe(400);
  });
});

describe("GitHub's signing keys", () => {
  it('fetches them again for an unknown key id, at most once per 30 s', async () => {
    const kg = await scanning();
    const first = await postAlerts(kg, [alert(generateSecret())]);
    expect(first.status).toBe(200);
    const fetched = github.state.requests;

    // GitHub adds a key: the first alert it signs makes keygate fetch the keys once more.
    const added = newSigningKey();
    github.state.keys.push(added);
    kg.time.now += 31_000;
    expect((await postAlerts(kg, [alert(generateSecret())], added)).status).toBe(200);
    expect(github.state.requests).toBe(fetched + 1);
    expect((await postAlerts(kg, [alert(generateSecret())], added)).status).toBe(200);
    expect(github.state.requests).toBe(fetched + 1);

    // Made-up ids: one fetch, then none until 30 s have passed.
    kg.time.now += 31_000;
    expect((await postAlerts(kg, [alert(generateSecret())], newSigningKey())).status).toBe(401);
    expect(github.state.requests).toBe(fetched + 2);
    expect((await postAlerts(kg, [alert(generateSecret())], newSigningKey())).status).toBe(401);
    expect(github.state.requests).toBe(fetched + 2);
  });

  it('counts every listed key, current or not', async () => {
    const kg = await scanning();
    const older = newSigningKey();
    github.state.keys.push(older); // listed with is_current false
    expect((await postAlerts(kg, [alert(generateSecret())], older)).status).toBe(200);
  });

  it('keeps using the keys it holds while the keys URL fails', async () => {
    const kg = await scanning();
    const key = await kg.createKey(42, { expiresIn: 86_400 });
    expect((await postAlerts(kg, [alert(generateSecret())])).status).toBe(200);
    const fetched = github.state.requests;
    github.state.failing = true;
    kg.time.now += 2 * 3_600_000; // past the hour: a refresh is due, and fails
    const response = await postAlerts(kg, [alert(key.secret)]);
    expect(response.status).toBe(200);
    expect(response.json[0].label).toBe('true_positive');
    expect(github.state.requests).toBe(fetched + 1);
    expect(await verifyCode(kg, key)).toBe('DISABLED');
  });

  it('answers 503 while no key could be fetched yet, and changes nothing', async () => {
    github.state.failing = true;
    const kg = await scanning();
    const key = await kg.createKey(42);
    const response = await postAlerts(kg, [alert(key.secret)]);
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('30');
    expect(await verifyCode(kg, key)).toBe('VALID');
  });
});
