// Audit lines (docs/configuration.md): one line per committed change, named in msg, with key, userId, by and the
// request's id; apikeys.purged once per pass that removed any. Never a secret, token or hash.
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { createLogger } from '../../src/core/log';
import { startPurgeTimer } from '../../src/jobs/purge';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
});
afterEach(() => k.close());

describe('audit lines', () => {
  it('apikey.created by a token and by a key, with the request id', async () => {
    const token = await k.token(42);
    const created = await k.req('POST', '/apikeys/jwt', {
      headers: { authorization: `Bearer ${token}`, 'x-request-id': 'req-create-1' },
      body: { name: 'a', level: 3, expiresIn: 60 },
    });
    const parent = created.json.apikey;
    const child = await k.req('POST', '/apikeys/key', {
      headers: { ...k.basic(parent.key, parent.secret), 'x-request-id': 'req-create-2' },
      body: { name: 'b', level: 1, expiresIn: 60 },
    });
    const lines = k.logLines('apikey.created');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ key: parent.key, userId: 42, by: 'jwt:42', requestId: 'req-create-1' });
    expect(lines[1]).toMatchObject({
      key: child.json.apikey.key,
      userId: 42,
      by: `key:${parent.key}`,
      requestId: 'req-create-2',
    });
    const text = JSON.stringify(k.logLines());
    expect(text).not.toContain(parent.secret);
    expect(text).not.toContain(child.json.apikey.secret);
    expect(text).not.toContain(token);
  });

  it('apikey.deleted and apikey.rotated (key the new one, previousKey the old)', async () => {
    const victim = await k.createKey(42);
    const old = await k.createKey(42);
    await k.req('DELETE', `/apikeys/${victim.key}/key`, {
      headers: { ...k.basic(old.key, old.secret), 'x-request-id': 'req-del' },
    });
    const rotated = await k.req('POST', `/apikeys/${old.key}/rotate/jwt`, {
      headers: { ...(await k.bearer(42)), 'x-request-id': 'req-rot' },
    });
    expect(k.logLines('apikey.deleted')).toEqual([
      expect.objectContaining({ key: victim.key, userId: 42, by: `key:${old.key}`, requestId: 'req-del' }),
    ]);
    expect(k.logLines('apikey.rotated')).toEqual([
      expect.objectContaining({
        key: rotated.json.apikey.key,
        previousKey: old.key,
        userId: 42,
        by: 'jwt:42',
        requestId: 'req-rot',
      }),
    ]);
    expect(JSON.stringify(k.logLines())).not.toContain(rotated.json.apikey.secret);
  });

  it('no line for a change that did not happen (403, 404, 409)', async () => {
    const headers = await k.bearer(42, 1);
    await k.req('POST', '/apikeys/jwt', { headers, body: { name: 'a', level: 5, expiresIn: 60 } });
    await k.req('DELETE', '/apikeys/kg_0000000000000000000000/jwt', { headers });
    await k.req('POST', '/apikeys/kg_0000000000000000000000/rotate/jwt', { headers });
    for (const msg of ['apikey.created', 'apikey.deleted', 'apikey.rotated']) {
      expect(k.logLines(msg)).toEqual([]);
    }
  });

  it('apikeys.purged with the count, once per pass that removed any', async () => {
    await k.createKey(1, { expiresIn: 1 });
    await k.createKey(2, { expiresIn: 1 });
    await k.createKey(3, { expiresIn: 3600 });
    k.time.now += 1000;
    const written: string[] = [];
    const logger = createLogger('info', (chunk) => written.push(chunk));
    // Three passes: the first removes both expired keys, the next two find nothing.
    let calls = 0;
    const threePasses = Promise.withResolvers<void>();
    const timer = startPurgeTimer({
      store: {
        deleteExpiredBatch: async (now, limit) => {
          const removed = await k.keygate.store.deleteExpiredBatch(now, limit);
          if (++calls === 3) threePasses.resolve();
          return removed;
        },
      },
      clock: () => k.time.now,
      intervalSeconds: 0.001,
      logger,
    });
    await threePasses.promise;
    await timer.stop();
    logger.flush();
    const lines = written
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    expect(lines).toEqual([expect.objectContaining({ msg: 'apikeys.purged', count: 2 })]);
  });
});
