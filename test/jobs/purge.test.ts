// The purge: removes expired keys only, in batches, with an injected clock.

import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { createLogger } from '../../src/core/log';
import { PURGE_PAUSE_MS, purgeExpiredKeys, startPurgeTimer } from '../../src/jobs/purge';
import { type TestKeygate, testKeygate } from '../support/keygate';
import { rawQuery } from '../support/raw-query';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate({ MAX_KEYS_PER_USER: '100' });
});
afterEach(() => k.close());

const count = async () => Number((await rawQuery(k.keygate, 'SELECT count(*) AS n FROM api_keys'))[0]?.n);

describe('purgeExpiredKeys', () => {
  it('removes keys at or past their expiry and keeps the live ones', async () => {
    for (let i = 0; i < 5; i++) await k.createKey(1, { expiresIn: 10 });
    const live = await k.createKey(1, { expiresIn: 11 });
    k.time.now += 10_000;
    expect(await purgeExpiredKeys(k.keygate.store, () => k.time.now)).toBe(5);
    expect(await count()).toBe(1);
    expect(await k.keygate.store.findKey(live.key)).toBeDefined();
    expect(await purgeExpiredKeys(k.keygate.store, () => k.time.now)).toBe(0);
  });

  it('works in batches of the given size until a short batch', async () => {
    for (let i = 0; i < 7; i++) await k.createKey(1, { expiresIn: 1 });
    k.time.now += 1000;
    const batches: number[] = [];
    const store = {
      deleteExpiredBatch: async (now: number, limit: number) => {
        const removed = await k.keygate.store.deleteExpiredBatch(now, limit);
        batches.push(removed);
        return removed;
      },
    };
    expect(await purgeExpiredKeys(store, () => k.time.now, { batchSize: 3 })).toBe(7);
    expect(batches).toEqual([3, 3, 1]);
  });

  it('lets requests run between batches', async () => {
    for (let i = 0; i < 6; i++) await k.createKey(1, { expiresIn: 1 });
    k.time.now += 1000;
    const order: string[] = [];
    const store = {
      deleteExpiredBatch: async (now: number, limit: number) => {
        order.push('batch');
        return k.keygate.store.deleteExpiredBatch(now, limit);
      },
    };
    const purge = purgeExpiredKeys(store, () => k.time.now, { batchSize: 2 });
    const request = k.req('GET', '/health').then(() => order.push('request'));
    await Promise.all([purge, request]);
    expect(order.indexOf('request')).toBeLessThan(order.lastIndexOf('batch'));
  });
});

describe('pacing', () => {
  it('waits four times as long as each batch took (a fifth of the time), and at least 1 ms', async () => {
    for (let i = 0; i < 7; i++) await k.createKey(1, { expiresIn: 1 });
    k.time.now += 1000;
    let now = 0;
    const took = [4, 0, 2]; // ms each batch takes, on the injected monotonic clock
    const store = {
      deleteExpiredBatch: async (at: number, limit: number) => {
        now += took.shift() ?? 0;
        return k.keygate.store.deleteExpiredBatch(at, limit);
      },
    };
    const waits: number[] = [];
    const removed = await purgeExpiredKeys(store, () => k.time.now, {
      batchSize: 3,
      elapsed: () => now,
      wait: async (ms) => {
        waits.push(ms);
      },
    });
    expect(removed).toBe(7);
    // Batches of 3, 3 and then 1 (short: the pass ends without waiting).
    expect(waits).toEqual([16, PURGE_PAUSE_MS]);
  });

  it('takes a larger share when told to', async () => {
    for (let i = 0; i < 4; i++) await k.createKey(1, { expiresIn: 1 });
    k.time.now += 1000;
    let now = 0;
    const store = {
      deleteExpiredBatch: async (at: number, limit: number) => {
        now += 10;
        return k.keygate.store.deleteExpiredBatch(at, limit);
      },
    };
    const waits: number[] = [];
    await purgeExpiredKeys(store, () => k.time.now, {
      batchSize: 2,
      timeShare: 0.5,
      elapsed: () => now,
      wait: async (ms) => {
        waits.push(ms);
      },
    });
    expect(waits).toEqual([10, 10]);
  });
});

describe('stopping', () => {
  it('ends a pass after the batch in hand once the signal aborts', async () => {
    for (let i = 0; i < 6; i++) await k.createKey(1, { expiresIn: 1 });
    k.time.now += 1000;
    const stop = new AbortController();
    const store = {
      deleteExpiredBatch: async (now: number, limit: number) => {
        const removed = await k.keygate.store.deleteExpiredBatch(now, limit);
        stop.abort();
        return removed;
      },
    };
    expect(await purgeExpiredKeys(store, () => k.time.now, { batchSize: 2, signal: stop.signal })).toBe(2);
    expect(await count()).toBe(4);
  });

  it('lets startPurgeTimer.stop() return without waiting for a long pass to finish', async () => {
    for (let i = 0; i < 6; i++) await k.createKey(1, { expiresIn: 1 });
    k.time.now += 1000;
    const firstBatch = Promise.withResolvers<void>();
    const timer = startPurgeTimer({
      store: {
        deleteExpiredBatch: async (now) => {
          const removed = await k.keygate.store.deleteExpiredBatch(now, 1);
          firstBatch.resolve();
          return removed > 0 ? 100 : 0; // claims full batches: the pass would run on and on
        },
      },
      clock: () => k.time.now,
      intervalSeconds: 0.001,
      logger: createLogger('silent'),
    });
    await firstBatch.promise;
    await timer.stop();
    expect(await count()).toBeGreaterThan(0);
  });
});

describe('startPurgeTimer', () => {
  it('purges on its interval and stops cleanly', async () => {
    await k.createKey(1, { expiresIn: 1 });
    k.time.now += 1000;
    let calls = 0;
    const ran = Promise.withResolvers<void>();
    const timer = startPurgeTimer({
      store: {
        deleteExpiredBatch: async (now, limit) => {
          calls++;
          const removed = await k.keygate.store.deleteExpiredBatch(now, limit);
          ran.resolve();
          return removed;
        },
      },
      clock: () => k.time.now,
      intervalSeconds: 0.001,
      logger: createLogger('silent'),
    });
    await ran.promise;
    await timer.stop();
    const after = calls;
    expect(await count()).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(calls).toBe(after);
  });

  it('removes usage rows past USAGE_RETENTION_DAYS after the expired keys, and logs how many', async () => {
    const key = await k.createKey(1, { expiresIn: 100 * 24 * 3600 });
    const hour = k.time.now - (k.time.now % 3_600_000);
    await k.keygate.usageStore.writeUsage({
      rows: [0, 1, 2].map((h) => ({
        keyId: key.key,
        bucket: hour + h * 3_600_000,
        valid: 1,
        rateLimited: 0,
        usageExceeded: 0,
        denied: 0,
      })),
      lastUsed: [],
    });
    k.time.now = hour + 2 * 24 * 3_600_000 + 3_600_000 + 1; // two days and an hour on
    const purged = Promise.withResolvers<void>();
    const lines: string[] = [];
    const timer = startPurgeTimer({
      store: k.keygate.store,
      clock: () => k.time.now,
      intervalSeconds: 0.001,
      logger: createLogger('info', (line) => {
        lines.push(line);
        if (line.includes('usage.purged')) purged.resolve();
      }),
      usage: { store: k.keygate.usageStore, retentionDays: 2 },
    });
    await purged.promise;
    await timer.stop();
    const left = await rawQuery(k.keygate, 'SELECT bucket FROM key_usage ORDER BY bucket');
    expect(left.map((row) => Number(row.bucket))).toEqual([hour + 2 * 3_600_000]);
    expect(JSON.parse(lines.find((line) => line.includes('usage.purged')) ?? '{}')).toMatchObject({
      msg: 'usage.purged',
      rows: 2,
      retentionDays: 2,
    });
  });
});
