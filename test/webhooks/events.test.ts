// Every change to keys and policies sends its event, written in the change's transaction, signed by Standard
// Webhooks (checked with the standard's own library), its data the key info and never a secret, a
// hash or a token. On both engines (KEYGATE_TEST_DATABASE=postgres).
import { afterEach, describe, expect, it, setDefaultTimeout } from 'bun:test';
import { createHash } from 'node:crypto';
import { assertNoSecrets, type Received, verified, webhookSetup } from './support';

// On PostgreSQL the first test of a run also creates the template database.
setDefaultTimeout(30_000);

let setup: Awaited<ReturnType<typeof webhookSetup>> | undefined;
afterEach(async () => {
  await setup?.close();
  setup = undefined;
});

const hashHex = (secret: string) => createHash('sha256').update(secret).digest('hex');
const hashBase64 = (secret: string) => createHash('sha256').update(secret).digest('base64');

describe('key events', () => {
  it('create, update, rotate, delete, revoke-all, purge and policy changes each send their event, signed and without secrets', async () => {
    setup = await webhookSetup();
    const { kg, receiver, endpoint, deliver } = setup;
    const owner = await kg.bearer(7);
    const secrets: string[] = [];
    const track = (secret: string) => secrets.push(secret, hashHex(secret), hashBase64(secret));
    const created = await kg.createKey(7, { name: 'first' });
    track(created.secret);
    const patched = await kg.req('PATCH', `/apikeys/${created.key}/jwt`, {
      headers: owner,
      body: { name: 'renamed', enabled: false },
    });
    expect(patched.status).toBe(200);
    const rotated = await kg.req('POST', `/apikeys/${created.key}/rotate/jwt`, {
      headers: owner,
      body: { gracePeriod: 60 },
    });
    expect(rotated.status).toBe(201);
    track(rotated.json.apikey.secret);
    const second = await kg.createKey(7, { name: 'second' });
    track(second.secret);
    expect((await kg.req('DELETE', `/apikeys/${second.key}/jwt`, { headers: owner })).status).toBe(204);
    const doomed = await kg.createKey(8, { name: 'doomed' });
    track(doomed.secret);
    expect((await kg.req('DELETE', '/admin/users/8/apikeys', { headers: await kg.operator() })).status).toBe(
      200,
    );
    const shortLived = await kg.createKey(9, { name: 'short', expiresIn: 60 });
    track(shortLived.secret);
    const policy = await kg.req('PUT', '/admin/users/7/policy', {
      headers: await kg.operator('alice'),
      body: { ratelimit: null, credits: null, maxKeys: 5, maxLevel: null },
    });
    expect(policy.status).toBe(200);
    kg.time.now += 61_000;
    expect(await kg.keygate.service.deleteExpiredBatch(kg.time.now, 25)).toBeGreaterThanOrEqual(1);

    await deliver();
    const byType = (type: string, key?: string): Received[] =>
      receiver.received.filter(
        (entry) => entry.json.type === type && (key === undefined || entry.json.data.key === key),
      );
    for (const entry of receiver.received) {
      expect(verified(endpoint.secret, entry)).toEqual(entry.json);
      assertNoSecrets(entry.body, secrets);
      // The token of the caller is no part of any message either.
      assertNoSecrets(entry.body, [owner.authorization.slice('Bearer '.length)]);
      expect(Object.keys(entry.json).sort()).toEqual(['data', 'timestamp', 'type']);
      expect(entry.json.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }

    const [createdEvent] = byType('key.created', created.key);
    expect(createdEvent?.json.data).toMatchObject({
      key: created.key,
      name: 'first',
      userId: 7,
      level: 3,
      enabled: true,
      by: 'jwt:7',
      expiresAt: created.expiresAt,
    });
    // The same shape as GET /apikeys/:id answers (key info A), plus by.
    const [updated] = byType('key.updated', created.key);
    expect(updated?.json.data).toMatchObject({
      key: created.key,
      name: 'renamed',
      enabled: false,
      by: 'jwt:7',
    });
    expect([...((updated?.json.data.changed as string[]) ?? [])].sort()).toEqual(['enabled', 'name']);
    const [rotatedEvent] = byType('key.rotated');
    expect(rotatedEvent?.json.data).toMatchObject({
      key: rotated.json.apikey.key,
      by: 'jwt:7',
      previous: { key: created.key, expiresAt: rotated.json.previous.expiresAt },
    });
    expect(byType('key.deleted', second.key).map((entry) => entry.json.data.reason)).toEqual(['deleted']);
    expect(byType('key.deleted', doomed.key).map((entry) => entry.json.data)).toEqual([
      expect.objectContaining({ reason: 'revoked', by: 'admin:ops', userId: 8 }),
    ]);
    expect(byType('key.deleted', shortLived.key).map((entry) => entry.json.data)).toEqual([
      expect.objectContaining({ reason: 'expired', by: 'purge', userId: 9 }),
    ]);
    const [policyEvent] = byType('user.policy_updated');
    expect(policyEvent?.json.data).toEqual({
      userId: 7,
      by: 'admin:alice',
      policy: { ratelimit: null, credits: null, maxKeys: 5, maxLevel: null, permissions: null },
    });
    // Each message once, each with its own webhook-id.
    const ids = receiver.received.map((entry) => entry.headers['webhook-id']);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('a removed policy sends user.policy_updated with policy null', async () => {
    setup = await webhookSetup(['user.policy_updated']);
    const { kg, receiver, deliver } = setup;
    const body = { ratelimit: null, credits: null, maxKeys: 3, maxLevel: null };
    await kg.req('PUT', '/admin/users/4/policy', { headers: await kg.operator(), body });
    expect((await kg.req('DELETE', '/admin/users/4/policy', { headers: await kg.operator() })).status).toBe(
      204,
    );
    await deliver();
    expect(receiver.received.map((entry) => entry.json.data.policy)).toEqual([
      expect.objectContaining({ maxKeys: 3 }),
      null,
    ]);
  });

  it('writes nothing for an event no endpoint takes', async () => {
    setup = await webhookSetup(['key.deleted']);
    const { kg, receiver, endpoint, deliver } = setup;
    await kg.createKey(3);
    expect(await deliver()).toBe(0);
    const messages = await kg.req('GET', `/admin/webhooks/${endpoint.id}/messages`, {
      headers: await kg.operator(),
    });
    expect(messages.json.messages).toEqual([]);
    expect(receiver.received).toEqual([]);
  });

  it('a leak reported to /admin/leaks sends key.leaked beside key.updated (the disable), written in its transaction', async () => {
    setup = await webhookSetup();
    const { kg, receiver, deliver } = setup;
    const key = await kg.createKey(5);
    const reported = await kg.req('POST', '/admin/leaks', {
      headers: await kg.operator('alice'),
      body: { secrets: [key.secret], source: 'gitleaks' },
    });
    expect(reported.json.found).toEqual([{ key: key.key, action: 'disabled' }]);
    await deliver();
    const types = receiver.received
      .filter((entry) => entry.json.data.key === key.key)
      .map((entry) => entry.json.type);
    expect(types.sort()).toEqual(['key.created', 'key.leaked', 'key.updated']);
    const event = receiver.received.find((entry) => entry.json.type === 'key.leaked');
    expect(event?.json.data).toMatchObject({
      key: key.key,
      source: 'gitleaks',
      action: 'disabled',
      by: 'admin:alice',
      enabled: false,
    });
    assertNoSecrets(event?.body as string, [key.secret]);
  });

  it('a leak with LEAK_ACTION=delete sends key.leaked beside key.deleted', async () => {
    setup = await webhookSetup(['*'], { LEAK_ACTION: 'delete' });
    const { kg, receiver, deliver } = setup;
    const key = await kg.createKey(5);
    const reported = await kg.req('POST', '/admin/leaks', {
      headers: await kg.operator(),
      body: { secrets: [key.secret] },
    });
    expect(reported.json.found).toEqual([{ key: key.key, action: 'deleted' }]);
    await deliver();
    const types = receiver.received
      .filter((entry) => entry.json.data.key === key.key)
      .map((entry) => entry.json.type);
    expect(types.sort()).toEqual(['key.created', 'key.deleted', 'key.leaked']);
  });

  it('a change that fails writes no message (the event is in its transaction)', async () => {
    setup = await webhookSetup();
    const { kg, endpoint, deliver } = setup;
    const owner = await kg.bearer(6);
    const key = await kg.createKey(6);
    // A rotation refused at the cap commits nothing, so it sends nothing.
    await kg.req('PUT', '/admin/users/6/policy', {
      headers: await kg.operator(),
      body: { ratelimit: null, credits: null, maxKeys: 1, maxLevel: null },
    });
    const refused = await kg.req('POST', `/apikeys/${key.key}/rotate/jwt`, {
      headers: owner,
      body: { gracePeriod: 60 },
    });
    expect(refused.status).toBe(409);
    await deliver();
    const messages = await kg.req('GET', `/admin/webhooks/${endpoint.id}/messages`, {
      headers: await kg.operator(),
    });
    expect(messages.json.messages.map((m: { type: string }) => m.type).sort()).toEqual([
      'key.created',
      'user.policy_updated',
    ]);
  });

  it('a create that sends key.created is counted in the operator’s overview like any other', async () => {
    setup = await webhookSetup(['key.created']);
    const { kg } = setup;
    await kg.createKey(6);
    await kg.createKey(7);
    const overview = await kg.req('GET', '/admin/overview', { headers: await kg.operator() });
    expect(overview.json.created).toEqual({ day: 2, month: 2 });
  });
});
