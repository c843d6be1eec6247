// Last use and usage history through HTTP, on both engines: what verify and forward-auth count, the
// not-yet-flushed counts included, lastUsedAt in key info, buckets by hour and day, the query rules,
// 404/403 as for get, removal with the key, and retention.

import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'bun:test';
import { generateSecret } from '../../src/apikeys/secrets';
import { purgeOldUsage } from '../../src/jobs/purge';
import { START, type TestKeygate, testKeygate } from '../support/keygate';
import { sharedPostgres, TEST_ENGINE } from '../support/postgres';
import { rawQuery } from '../support/raw-query';

beforeAll(async () => {
  if (TEST_ENGINE === 'postgres') await sharedPostgres();
}, 120_000);

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
});
afterEach(() => k.close());

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** START (10:00:00 UTC) is the start of an hour; this is the start of its day. */
const DAY_START = START - (START % DAY);

type Key = { key: string; secret: string };

const verify = (key: Key, extra: Record<string, unknown> = {}) =>
  k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret, ...extra } });

const forwardAuth = (key: Key, query = '') =>
  k.req('GET', `/forward-auth${query}`, { headers: k.basic(key.key, key.secret) });

async function usageOf(key: string, query = '', headers?: Record<string, string>) {
  return k.req('GET', `/apikeys/${key}/usage/jwt${query}`, { headers: headers ?? (await k.bearer(42)) });
}

const bucket = (
  start: number,
  counts: Partial<Record<'valid' | 'rateLimited' | 'usageExceeded' | 'denied', number>>,
) => ({
  start: new Date(start).toISOString(),
  valid: 0,
  rateLimited: 0,
  usageExceeded: 0,
  denied: 0,
  ...counts,
});

async function storedRows(key: string) {
  return rawQuery(
    k.keygate,
    'SELECT bucket, valid, denied FROM key_usage WHERE key_id = $1 ORDER BY bucket',
    [key],
  );
}

describe('what is counted', () => {
  it('verify: VALID as valid; wrong secret, expired and level below minLevel as denied', async () => {
    const key = await k.createKey(42, { level: 3, expiresIn: 7200 });
    k.time.now += 60_000;
    expect((await verify(key)).json.code).toBe('VALID');
    expect((await verify(key)).json.code).toBe('VALID');
    expect((await verify({ key: key.key, secret: generateSecret() })).json.code).toBe('NOT_FOUND');
    expect((await verify(key, { minLevel: 4 })).json.code).toBe('INSUFFICIENT_LEVEL');
    k.time.now = START + 7200_000;
    expect((await verify(key)).json.code).toBe('EXPIRED');
    k.time.now = START + 60_000;
    const response = await usageOf(key.key, `?until=${new Date(START + 2 * HOUR).toISOString()}`);
    // The key expired at 12:00: its owner no longer sees it (404), so look as of 10:01.
    expect(response.status).toBe(200);
    expect(response.json).toEqual({
      result: 'success',
      key: key.key,
      granularity: 'hour',
      usage: [bucket(START, { valid: 2, denied: 2 }), bucket(START + 2 * HOUR, { denied: 1 })],
    });
  });

  it('forward-auth counts as verify does', async () => {
    const key = await k.createKey(42, { level: 3 });
    expect((await forwardAuth(key)).status).toBe(200);
    expect((await forwardAuth(key, '?minLevel=5')).status).toBe(403);
    expect((await forwardAuth({ key: key.key, secret: generateSecret() })).status).toBe(403);
    expect((await usageOf(key.key)).json.usage).toEqual([bucket(START, { valid: 1, denied: 2 })]);
  });

  it('a secret whose checksum is wrong is refused before any lookup, so it counts nothing', async () => {
    const key = await k.createKey(42);
    // Another last character (whatever the secret's was): its checksum no longer matches.
    const last = key.secret.at(-1) === 'x' ? 'y' : 'x';
    expect((await verify({ key: key.key, secret: `${key.secret.slice(0, -1)}${last}` })).json.code).toBe(
      'NOT_FOUND',
    );
    expect((await usageOf(key.key)).json.usage).toEqual([]);
  });

  it('an unknown key id counts nothing and leaves no row; tokens are not counted', async () => {
    const unknown = 'kg_0000000000000000000000000000';
    expect((await verify({ key: unknown, secret: 'whatever' })).json.code).toBe('NOT_FOUND');
    await k.req('POST', '/apikeys/verify', { body: { token: await k.token(42) } });
    await k.usageTick();
    const rows = await rawQuery(k.keygate, 'SELECT count(*) AS n FROM key_usage');
    expect(Number(rows[0]?.n)).toBe(0);
  });

  it('a /key endpoint’s authentication is a last use but no verification', async () => {
    const key = await k.createKey(42, { level: 3 });
    k.time.now += 5000;
    const listed = await k.req('GET', '/apikeys/key', { headers: k.basic(key.key, key.secret) });
    expect(listed.status).toBe(200);
    const got = await k.req('GET', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(42) });
    expect(got.json.apikey.lastUsedAt).toBe(new Date(START + 5000).toISOString());
    expect((await usageOf(key.key)).json.usage).toEqual([]);
  });
});

describe('flushing and lastUsedAt', () => {
  it('includes the counts not yet flushed, and counts each once after the flush', async () => {
    const key = await k.createKey(42);
    await verify(key);
    expect(await storedRows(key.key)).toEqual([]);
    expect((await usageOf(key.key)).json.usage).toEqual([bucket(START, { valid: 1 })]);
    await k.usageTick();
    expect((await storedRows(key.key)).map((r) => [Number(r.bucket), Number(r.valid)])).toEqual([[START, 1]]);
    await verify(key);
    expect((await usageOf(key.key)).json.usage).toEqual([bucket(START, { valid: 2 })]);
  });

  it('lastUsedAt: null until used, then the latest valid use; written by the next flush', async () => {
    const key = await k.createKey(42);
    const get = async () =>
      (await k.req('GET', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(42) })).json.apikey.lastUsedAt;
    expect(await get()).toBeNull();
    k.time.now += 1000;
    await verify(key);
    k.time.now += 1000;
    await verify({ key: key.key, secret: generateSecret() }); // a refusal is no use
    expect(await get()).toBe(new Date(START + 1000).toISOString());
    const stored = async () =>
      (await rawQuery(k.keygate, 'SELECT last_used_at FROM api_keys WHERE id = $1', [key.key]))[0]
        ?.last_used_at;
    expect(await stored()).toBeNull();
    // The flush every USAGE_FLUSH_SECONDS (10 by default) writes it: the database is at most one interval behind.
    expect(k.usageTimer.intervalMs).toBe(10_000);
    await k.usageTick();
    expect(Number(await stored())).toBe(START + 1000);
    expect(await get()).toBe(new Date(START + 1000).toISOString());
    // Listed the same way.
    const listed = await k.req('GET', '/apikeys/jwt', { headers: await k.bearer(42) });
    expect(listed.json.apikeys[0].lastUsedAt).toBe(new Date(START + 1000).toISOString());
  });

  it('a graceful close writes the counts not yet flushed', async () => {
    const key = await k.createKey(42);
    await verify(key);
    // Read after close only works on a file or a server: check what close hands the store instead.
    const written: unknown[] = [];
    const write = k.keygate.usageStore.writeUsage.bind(k.keygate.usageStore);
    k.keygate.usageStore.writeUsage = async (batch) => {
      written.push(batch);
      await write(batch);
    };
    await k.close();
    expect(written).toEqual([
      {
        rows: [{ keyId: key.key, bucket: START, valid: 1, rateLimited: 0, usageExceeded: 0, denied: 0 }],
        lastUsed: [{ keyId: key.key, at: START }],
        // Every verification's code, for the operator's overview.
        verifications: [{ bucket: START, code: 'VALID', count: 1 }],
      },
    ]);
    k = await testKeygate(); // afterEach closes this one
  });
});

describe('buckets', () => {
  it('by hour: the UTC hour each count fell in, ascending, only those with a count', async () => {
    const key = await k.createKey(42, { expiresIn: (10 * DAY) / 1000 });
    await verify(key);
    k.time.now = START + 2 * HOUR + 59 * 60_000;
    await verify(key);
    await k.usageTick();
    k.time.now = START + 3 * HOUR;
    await verify(key, { minLevel: 8 });
    const response = await usageOf(key.key);
    expect(response.json.usage).toEqual([
      bucket(START, { valid: 1 }),
      bucket(START + 2 * HOUR, { valid: 1 }),
      bucket(START + 3 * HOUR, { denied: 1 }),
    ]);
  });

  it('by day: the UTC days, summed over their hours, stored and not yet flushed alike', async () => {
    const key = await k.createKey(42, { expiresIn: (10 * DAY) / 1000 });
    await verify(key);
    k.time.now = DAY_START + DAY - 1; // 23:59:59.999
    await verify(key);
    await k.usageTick();
    k.time.now = DAY_START + 2 * DAY + 5 * HOUR;
    await verify(key);
    await verify({ key: key.key, secret: generateSecret() });
    const response = await usageOf(key.key, '?granularity=day');
    expect(response.json.granularity).toBe('day');
    expect(response.json.usage).toEqual([
      bucket(DAY_START, { valid: 2 }),
      bucket(DAY_START + 2 * DAY, { valid: 1, denied: 1 }),
    ]);
  });

  it('since and until choose the buckets that overlap them; the defaults are the last 24 hours or 30 days', async () => {
    const key = await k.createKey(42, { expiresIn: (100 * DAY) / 1000 });
    for (const hours of [0, 5, 30, 24 * 20, 24 * 40]) {
      k.time.now = START + hours * HOUR;
      await verify(key);
    }
    k.time.now = START + 24 * 40 * HOUR + 1000;
    const starts = async (query: string) =>
      (await usageOf(key.key, query)).json.usage.map((b: { start: string }) => Date.parse(b.start));
    expect(await starts('')).toEqual([START + 24 * 40 * HOUR]);
    const day0 = DAY_START + 40 * DAY;
    expect(await starts('?granularity=day')).toEqual([DAY_START + 20 * DAY, day0]);
    const iso = (ms: number) => new Date(ms).toISOString();
    // since inside the 10:00 hour includes it; until at 15:00 exactly includes the 15:00 hour.
    expect(await starts(`?since=${iso(START + 30 * 60_000)}&until=${iso(START + 5 * HOUR)}`)).toEqual([
      START,
      START + 5 * HOUR,
    ]);
    expect(await starts(`?since=${iso(START + 1)}&until=${iso(START + 5 * HOUR - 1)}`)).toEqual([START]);
    // A bare date is midnight UTC; an offset is honoured.
    const date = iso(DAY_START + DAY).slice(0, 10);
    expect(await starts(`?granularity=day&since=${iso(DAY_START)}&until=${date}`)).toEqual([
      DAY_START,
      DAY_START + DAY,
    ]);
    expect(
      await starts(
        `?since=${encodeURIComponent(`${iso(START).slice(0, 10)}T12:00:00+02:00`)}&until=${iso(START)}`,
      ),
    ).toEqual([START]);
  });
});

describe('GET /apikeys/:id/usage/{jwt,key}', () => {
  it('answers under both schemes; the /key caller sees its own user’s keys', async () => {
    const key = await k.createKey(42);
    await verify(key);
    const caller = await k.createKey(42, { name: 'caller', level: 8 });
    const response = await k.req('GET', `/apikeys/${key.key}/usage/key`, {
      headers: k.basic(caller.key, caller.secret),
    });
    expect(response.status).toBe(200);
    expect(response.json.usage).toEqual([bucket(START, { valid: 1 })]);
  });

  it('404 alike for another user’s key, an expired key and an unknown key; 403 above the caller’s level', async () => {
    const others = await k.createKey(7);
    const expiring = await k.createKey(42, { expiresIn: 5 });
    const high = await k.createKey(42, { level: 6 });
    k.time.now += 5000;
    const bodies = new Set<string>();
    for (const id of [others.key, expiring.key, 'kg_0000000000000000000000']) {
      const response = await usageOf(id);
      expect(response.status).toBe(404);
      bodies.add(response.text);
    }
    expect(bodies.size).toBe(1);
    const refused = await usageOf(high.key, '', await k.bearer(42, 5));
    expect(refused.status).toBe(403);
    expect(refused.json.result).toBe('error');
  });

  it('checks credentials, then the id, then the query, then 404, then 403', async () => {
    const high = await k.createKey(42, { level: 6 });
    const noAuth = await k.req('GET', '/apikeys/nope/usage/jwt?granularity=week');
    expect(noAuth.status).toBe(401);
    const badToken = await k.req('GET', '/apikeys/nope/usage/jwt?granularity=week', {
      headers: { authorization: 'Bearer x.y.z' },
    });
    expect(badToken.status).toBe(403);
    const headers = await k.bearer(42, 5);
    const badId = await usageOf('nope', '?granularity=week', headers);
    expect([badId.status, badId.json.error]).toEqual([
      400,
      'The key id must be "kg_" followed by at least 22 letters and digits.',
    ]);
    const badQueryOfUnknown = await usageOf('kg_0000000000000000000000', '?granularity=week', headers);
    expect([badQueryOfUnknown.status, badQueryOfUnknown.json.error]).toEqual([
      400,
      'granularity must be hour or day.',
    ]);
    const badQueryAbove = await usageOf(high.key, '?granularity=week', headers);
    expect(badQueryAbove.status).toBe(400);
    expect((await usageOf('kg_0000000000000000000000', '', headers)).status).toBe(404);
  });

  const iso = (ms: number) => new Date(ms).toISOString();
  const BAD_QUERIES: Array<[string, string]> = [
    ['?granularity=week', 'granularity must be hour or day.'],
    ['?granularity=', 'granularity must be hour or day.'],
    ['?granularity=HOUR', 'granularity must be hour or day.'],
    ['?granularity=hour&granularity=day', 'The query parameter granularity is given twice.'],
    [
      '?since=x',
      'since must be an ISO 8601 date (2026-11-22) or date-time with a time zone (2026-11-22T10:00:00Z).',
    ],
    [
      '?until=1764000000000',
      'until must be an ISO 8601 date (2026-11-22) or date-time with a time zone (2026-11-22T10:00:00Z).',
    ],
    [
      '?since=2026-11-22T10:00:00',
      'since must be an ISO 8601 date (2026-11-22) or date-time with a time zone (2026-11-22T10:00:00Z).',
    ],
    [
      '?since=2026-02-30',
      'since must be an ISO 8601 date (2026-11-22) or date-time with a time zone (2026-11-22T10:00:00Z).',
    ],
    [
      '?since=2026-11-22T24:00:00Z',
      'since must be an ISO 8601 date (2026-11-22) or date-time with a time zone (2026-11-22T10:00:00Z).',
    ],
    [
      '?since=Sun%2C%2022%20Nov%202026%2010%3A00%3A00%20GMT',
      'since must be an ISO 8601 date (2026-11-22) or date-time with a time zone (2026-11-22T10:00:00Z).',
    ],
    [`?since=${iso(START)}&since=${iso(START)}`, 'The query parameter since is given twice.'],
    [`?since=${iso(START + 1)}&until=${iso(START)}`, 'since must not be after until.'],
    [
      `?since=${iso(START - 31 * DAY - 1)}&until=${iso(START)}`,
      'since and until may span at most 31 days of hours.',
    ],
    [
      `?granularity=day&since=${iso(START - 366 * DAY - 1)}&until=${iso(START)}`,
      'since and until may span at most 366 days of days.',
    ],
    [
      `?until=${iso(START - 40 * DAY)}&since=${iso(START - 80 * DAY)}`,
      'since and until may span at most 31 days of hours.',
    ],
    ['?limit=10', 'Unknown query parameter "limit": only granularity, since and until.'],
    [
      '?since',
      'since must be an ISO 8601 date (2026-11-22) or date-time with a time zone (2026-11-22T10:00:00Z).',
    ],
  ];

  it.each(BAD_QUERIES)('400 for the query %s', async (query, error) => {
    const key = await k.createKey(42);
    const response = await usageOf(key.key, query);
    expect(response.status).toBe(400);
    expect(response.json).toEqual({ result: 'error', error });
  });

  it('accepts the longest spans: 31 days of hours, 366 days of days', async () => {
    const key = await k.createKey(42);
    const ok = [
      `?since=${iso(START - 31 * DAY)}&until=${iso(START)}`,
      `?granularity=day&since=${iso(START - 366 * DAY)}&until=${iso(START)}`,
      `?since=${iso(START)}&until=${iso(START)}`,
    ];
    for (const query of ok) expect((await usageOf(key.key, query)).status).toBe(200);
  });
});

describe('removal', () => {
  it('a deleted key’s rows go with it, and its counts not yet flushed are never written', async () => {
    const gone = await k.createKey(42);
    const kept = await k.createKey(42);
    await verify(gone);
    await verify(kept);
    await k.usageTick();
    await verify(gone); // counted in memory, then the key is deleted
    const headers = await k.bearer(42);
    expect((await k.req('DELETE', `/apikeys/${gone.key}/jwt`, { headers })).status).toBe(204);
    await k.usageTick();
    expect(await storedRows(gone.key)).toEqual([]);
    expect(await storedRows(kept.key)).toHaveLength(1);
  });

  it('retention: the purge removes rows older than USAGE_RETENTION_DAYS', async () => {
    const key = await k.createKey(42, { expiresIn: (200 * DAY) / 1000 });
    await verify(key);
    k.time.now = START + 2 * HOUR;
    await verify(key);
    await k.usageTick();
    k.time.now = START + 90 * DAY + HOUR; // the 10:00 row is past 90 days, the 12:00 one not yet
    expect(await purgeOldUsage(k.keygate.usageStore, () => k.time.now, k.config.usageRetentionDays)).toBe(1);
    expect((await storedRows(key.key)).map((r) => Number(r.bucket))).toEqual([START + 2 * HOUR]);
  });
});
