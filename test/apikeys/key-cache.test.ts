// The key cache on its own: bounded (known and unknown ids apart), the TTL on an injected clock,
// eviction by the store's change events, and no stale row cached by a read that raced an eviction.
import { describe, expect, it } from 'bun:test';
import { createKeyCache } from '../../src/apikeys/key-cache';
import type { ApiKeyRow, KeysChangedListener } from '../../src/apikeys/store';

const row = (id: string, level = 1): ApiKeyRow => ({
  id,
  secretHash: new Uint8Array(32),
  userId: 1,
  level,
  name: id,
  createdAt: 0,
  expiresAt: 1e15,
});

/** A store whose reads are counted, answered at once when `sync` is on (as SQLite's), and held until released when `hold` is on. */
function fakeStore(rows: ApiKeyRow[]) {
  const table = new Map(rows.map((r) => [r.id, r]));
  const listeners: KeysChangedListener[] = [];
  const held: Array<() => void> = [];
  const state = { reads: 0, hold: false, sync: false };
  return {
    state,
    table,
    releaseReads: () => {
      for (const release of held.splice(0)) release();
    },
    announce: (ids: string[]) => {
      for (const listener of listeners) listener(ids);
    },
    findKey(id: string): ApiKeyRow | undefined | Promise<ApiKeyRow | undefined> {
      state.reads++;
      const value = table.get(id);
      if (state.sync) return value;
      if (!state.hold) return Promise.resolve(value);
      // The row as it was when the read ran; the answer arrives later.
      return new Promise((resolve) => held.push(() => resolve(value)));
    },
    onKeysChanged(listener: KeysChangedListener) {
      listeners.push(listener);
      return () => {};
    },
  };
}

function setup(options: { ttlSeconds?: number; maxKeys?: number; maxUnknown?: number } = {}) {
  const store = fakeStore([row('kg_a'), row('kg_b'), row('kg_c')]);
  const time = { now: 1_000_000 };
  const cache = createKeyCache({
    store,
    clock: () => time.now,
    ttlSeconds: options.ttlSeconds ?? 10,
    ...options,
  });
  return { store, time, cache };
}

describe('key cache', () => {
  it('reads a row once, then serves it from memory; unknown ids too', async () => {
    const { store, cache } = setup();
    expect((await cache.find('kg_a'))?.id).toBe('kg_a');
    expect((await cache.find('kg_a'))?.id).toBe('kg_a');
    expect(await cache.find('kg_zz')).toBeUndefined();
    expect(await cache.find('kg_zz')).toBeUndefined();
    expect(store.state.reads).toBe(2);
    expect(cache.size()).toEqual({ keys: 1, unknown: 1 });
  });

  it('reads again once the TTL has passed, not before', async () => {
    const { store, time, cache } = setup({ ttlSeconds: 10 });
    await cache.find('kg_a');
    time.now += 9_999;
    await cache.find('kg_a');
    expect(store.state.reads).toBe(1);
    store.table.set('kg_a', row('kg_a', 7));
    time.now += 1;
    expect((await cache.find('kg_a'))?.level).toBe(7);
    expect(store.state.reads).toBe(2);
  });

  it('with a TTL of 0 reads the store every time', async () => {
    const { store, cache } = setup({ ttlSeconds: 0 });
    await cache.find('kg_a');
    await cache.find('kg_a');
    await cache.find('kg_zz');
    expect(store.state.reads).toBe(3);
    expect(cache.size()).toEqual({ keys: 0, unknown: 0 });
  });

  it('keeps at most maxKeys rows and maxUnknown unknown ids, dropping the oldest', async () => {
    const { store, cache } = setup({ maxKeys: 2, maxUnknown: 2 });
    await cache.find('kg_a');
    await cache.find('kg_b');
    await cache.find('kg_c');
    for (const id of ['kg_x', 'kg_y', 'kg_z']) await cache.find(id);
    expect(cache.size()).toEqual({ keys: 2, unknown: 2 });
    const before = store.state.reads;
    await cache.find('kg_c');
    await cache.find('kg_z');
    expect(store.state.reads).toBe(before);
    await cache.find('kg_a'); // the oldest row was dropped
    await cache.find('kg_x'); // and the oldest unknown id
    expect(store.state.reads).toBe(before + 2);
  });

  it('forgets ids the store announces, known or unknown', async () => {
    const { store, cache } = setup();
    await cache.find('kg_a');
    await cache.find('kg_new');
    store.table.delete('kg_a');
    store.table.set('kg_new', row('kg_new'));
    store.announce(['kg_a', 'kg_new']);
    expect(await cache.find('kg_a')).toBeUndefined();
    expect((await cache.find('kg_new'))?.id).toBe('kg_new');
  });

  it('does not cache a row read before an eviction of its id that lands while the read is in flight', async () => {
    const { store, cache } = setup();
    store.state.hold = true;
    const racing = cache.find('kg_a'); // reads the row as it is now
    store.table.delete('kg_a'); // then a delete commits and is announced
    store.announce(['kg_a']);
    store.releaseReads();
    expect((await racing)?.id).toBe('kg_a'); // that caller saw the old row, as it was when it asked
    store.state.hold = false;
    expect(await cache.find('kg_a')).toBeUndefined(); // but nobody after it
  });

  it('shares one read between concurrent lookups of the same id', async () => {
    const { store, cache } = setup();
    store.state.hold = true;
    const both = Promise.all([cache.find('kg_b'), cache.find('kg_b')]);
    store.releaseReads();
    const [first, second] = await both;
    expect(first?.id).toBe('kg_b');
    expect(second).toBe(first);
    expect(store.state.reads).toBe(1);
  });

  it('answers and keeps a synchronous read (SQLite) at once, with no promise', () => {
    const { store, time, cache } = setup({ ttlSeconds: 10 });
    store.state.sync = true;
    const first = cache.find('kg_a');
    expect(first).not.toBeInstanceOf(Promise);
    expect((first as ApiKeyRow).id).toBe('kg_a');
    expect(cache.find('kg_zz')).toBeUndefined();
    expect(cache.find('kg_a')).toBe(first as ApiKeyRow);
    expect(store.state.reads).toBe(2); // kept: the second lookup of kg_a did not read
    expect(cache.size()).toEqual({ keys: 1, unknown: 1 });
    store.announce(['kg_a']); // evicted like any other row
    store.table.set('kg_a', row('kg_a', 7));
    expect((cache.find('kg_a') as ApiKeyRow).level).toBe(7);
    time.now += 10_000; // and read again once the TTL has passed
    cache.find('kg_a');
    expect(store.state.reads).toBe(4);
  });

  it("throws a synchronous store's failure, and caches nothing from it", async () => {
    const { store, cache } = setup();
    const findKey = store.findKey;
    store.findKey = () => {
      throw new Error('database gone');
    };
    expect(() => cache.find('kg_a')).toThrow('database gone');
    store.findKey = findKey;
    expect((await cache.find('kg_a'))?.id).toBe('kg_a');
    expect(store.state.reads).toBe(1);
  });

  it('does not cache a failed read', async () => {
    const { store, cache } = setup();
    const findKey = store.findKey;
    store.findKey = () => Promise.reject(new Error('database gone'));
    await expect(cache.find('kg_a')).rejects.toThrow('database gone');
    store.findKey = findKey;
    expect((await cache.find('kg_a'))?.id).toBe('kg_a');
  });

  for (const sync of [true, false]) {
    const store = sync ? 'a synchronous store (SQLite)' : 'a store that answers later (PostgreSQL)';

    it(`keeps the expired row itself when a refresh finds the key unchanged, its last use from the read: ${store}`, async () => {
      const { store, time, cache } = setup();
      store.state.sync = sync;
      store.table.set('kg_a', { ...row('kg_a'), lastUsedAt: 1_000 });
      const first = await cache.find('kg_a');
      // The new read is another object, its hash other bytes alike, and a later last use.
      store.table.set('kg_a', { ...row('kg_a'), secretHash: new Uint8Array(32), lastUsedAt: 5_000 });
      time.now += 10_000;
      const refreshed = await cache.find('kg_a');
      expect(store.state.reads).toBe(2);
      expect(refreshed).toBe(first as ApiKeyRow);
      expect(refreshed?.lastUsedAt).toBe(5_000);
    });

    it(`takes the new read when a refresh finds anything else changed: ${store}`, async () => {
      const changes: Partial<ApiKeyRow>[] = [
        { level: 2 },
        { name: 'renamed' },
        { enabled: false },
        { meta: '{"plan":"pro"}' },
        { secretHash: new Uint8Array(32).fill(1) },
        { credits: { remaining: 5, refillAmount: null, refillIntervalMs: null, refilledAt: 0 } },
      ];
      for (const change of changes) {
        const { store, time, cache } = setup();
        store.state.sync = sync;
        const first = await cache.find('kg_a');
        const changed = { ...row('kg_a'), ...change };
        store.table.set('kg_a', changed);
        time.now += 10_000;
        const refreshed = await cache.find('kg_a');
        expect(refreshed).not.toBe(first as ApiKeyRow);
        expect(refreshed).toBe(changed);
        // And it is what the cache holds from then on.
        expect(await cache.find('kg_a')).toBe(changed);
      }
    });
  }

  it('takes the new read, unchanged or not, when the id was evicted while it was in flight', async () => {
    const { store, time, cache } = setup();
    const first = await cache.find('kg_a');
    store.table.set('kg_a', { ...row('kg_a') });
    time.now += 10_000;
    store.state.hold = true;
    const pending = cache.find('kg_a');
    store.announce(['kg_a']);
    store.releaseReads();
    const fresh = await pending;
    expect(fresh).not.toBe(first as ApiKeyRow);
    expect(fresh).toBe(store.table.get('kg_a') as ApiKeyRow);
  });
});
