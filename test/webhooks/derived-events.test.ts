// The derived events fire once at their moment, with an injected clock: key.expiring at each
// lead time of WEBHOOK_EXPIRING_LEAD, key.rate_limited at most once per key per minute,
// key.credits_exhausted at a cycle's first USAGE_EXCEEDED, key.credits_low once per cycle below 10 %
// of what the cycle began with. On both engines.
import { afterEach, describe, expect, it, setDefaultTimeout } from 'bun:test';
import { assertNoSecrets, verified, webhookSetup } from './support';

// On PostgreSQL the first test of a run also creates the template database.
setDefaultTimeout(30_000);

let setup: Awaited<ReturnType<typeof webhookSetup>> | undefined;
afterEach(async () => {
  await setup?.close();
  setup = undefined;
});

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

type Setup = NonNullable<typeof setup>;

/** Verifies `key` once; its code. */
async function verify(s: Setup, key: { key: string; secret: string }) {
  return (await s.kg.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } })).json
    .code as string;
}

/** Creates a key for a fresh user with `settings`. */
async function create(s: Setup, settings: Record<string, unknown>, user = 21) {
  const response = await s.kg.req('POST', '/apikeys/jwt', {
    headers: await s.kg.bearer(user),
    body: { name: 'derived', level: 1, expiresIn: 3600, ...settings },
  });
  if (response.status !== 201) throw new Error(response.text);
  return response.json.apikey as { key: string; secret: string };
}

/** Written and delivered: what the receiver got of `type`. */
async function received(s: Setup, type: string) {
  await s.kg.keygate.webhooks.derived.settled();
  await s.deliver();
  return s.receiver.received.filter((entry) => entry.json.type === type);
}

describe('derived events', () => {
  it('key.expiring once at each lead time, across scans', async () => {
    setup = await webhookSetup(['key.expiring']);
    const s = setup;
    const { derived } = s.kg.keygate.webhooks;
    const long = await create(s, { expiresIn: 10 * (DAY / 1000) });
    // Created inside the 7-day window: told at the 1-day lead only.
    const short = await create(s, { expiresIn: 2 * (DAY / 1000) });
    expect(await derived.scanExpiring()).toBe(0);
    s.kg.time.now += DAY + MINUTE;
    expect(await derived.scanExpiring()).toBe(1);
    expect(await derived.scanExpiring()).toBe(0);
    let events = await received(s, 'key.expiring');
    expect(events.map((e) => [e.json.data.key, e.json.data.lead])).toEqual([[short.key, '1d']]);
    s.kg.time.now += 2 * DAY; // 3 days and a minute after the create: 7 days before the long key's expiry
    expect(await derived.scanExpiring()).toBe(1);
    s.kg.time.now += 6 * DAY; // a day before it
    expect(await derived.scanExpiring()).toBe(1);
    expect(await derived.scanExpiring()).toBe(0);
    events = await received(s, 'key.expiring');
    expect(events.map((e) => [e.json.data.key, e.json.data.lead])).toEqual([
      [short.key, '1d'],
      [long.key, '7d'],
      [long.key, '1d'],
    ]);
    for (const event of events) {
      expect(verified(s.endpoint.secret, event)).toEqual(event.json);
      expect(event.json.data).toMatchObject({ by: 'keygate', userId: 21, name: 'derived' });
      assertNoSecrets(event.body, [long.secret, short.secret]);
    }
  });

  it('key.rate_limited at most once per key per minute', async () => {
    setup = await webhookSetup(['key.rate_limited']);
    const s = setup;
    const key = await create(s, { ratelimit: { limit: 1, duration: 60 } });
    expect(await verify(s, key)).toBe('VALID');
    expect([await verify(s, key), await verify(s, key), await verify(s, key)]).toEqual([
      'RATE_LIMITED',
      'RATE_LIMITED',
      'RATE_LIMITED',
    ]);
    expect((await received(s, 'key.rate_limited')).length).toBe(1);
    s.kg.time.now += 30_000;
    expect(await verify(s, key)).toBe('RATE_LIMITED');
    expect((await received(s, 'key.rate_limited')).length).toBe(1);
    s.kg.time.now += 30_000;
    expect(await verify(s, key)).toBe('VALID');
    expect(await verify(s, key)).toBe('RATE_LIMITED');
    const events = await received(s, 'key.rate_limited');
    expect(events.length).toBe(2);
    expect(events[0]?.json.data).toMatchObject({
      key: key.key,
      ratelimit: { limit: 1, duration: 60, scope: 'key' },
      by: 'keygate',
    });
    assertNoSecrets(events[0]?.body as string, [key.secret]);
  });

  it('key.credits_low and key.credits_exhausted once per credit cycle; an update starts a new one', async () => {
    setup = await webhookSetup(['key.credits_low', 'key.credits_exhausted']);
    const s = setup;
    const key = await create(s, { credits: { remaining: 20 } }, 22);
    // 20 → 2 left: still 10 %, not below; 1 left is below.
    for (let i = 0; i < 18; i++) expect(await verify(s, key)).toBe('VALID');
    expect((await received(s, 'key.credits_low')).length).toBe(0);
    expect(await verify(s, key)).toBe('VALID');
    expect(await verify(s, key)).toBe('VALID');
    const low = await received(s, 'key.credits_low');
    expect(low.map((e) => e.json.data.remaining)).toEqual([1]);
    expect(low[0]?.json.data).toMatchObject({ key: key.key, threshold: 2, userId: 22 });
    expect([await verify(s, key), await verify(s, key)]).toEqual(['USAGE_EXCEEDED', 'USAGE_EXCEEDED']);
    expect((await received(s, 'key.credits_exhausted')).length).toBe(1);
    // A new cycle: the owner sets 10 credits again (a cycle is known by the ms it began).
    s.kg.time.now += 1000;
    const update = await s.kg.req('PATCH', `/apikeys/${key.key}/jwt`, {
      headers: await s.kg.bearer(22),
      body: { credits: { remaining: 10 } },
    });
    expect(update.status).toBe(200);
    for (let i = 0; i < 11; i++) await verify(s, key);
    expect((await received(s, 'key.credits_low')).length).toBe(2);
    expect((await received(s, 'key.credits_exhausted')).length).toBe(2);
  });

  it('a refill starts a new cycle that began with the refill amount', async () => {
    setup = await webhookSetup(['key.credits_low']);
    const s = setup;
    const key = await create(s, { credits: { remaining: 100, refill: { amount: 10, interval: 60 } } }, 23);
    for (let i = 0; i < 95; i++) await verify(s, key);
    // 5 of 100 left: below 10 of the set amount.
    expect((await received(s, 'key.credits_low')).map((e) => e.json.data.remaining)).toEqual([9]);
    s.kg.time.now += 60_000;
    // Refilled to 10: the cycle began with 10, below 1 is 0 left.
    for (let i = 0; i < 9; i++) await verify(s, key);
    expect((await received(s, 'key.credits_low')).length).toBe(1);
    await verify(s, key);
    expect((await received(s, 'key.credits_low')).map((e) => e.json.data.remaining)).toEqual([9, 0]);
  });
});
