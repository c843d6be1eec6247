// The in-memory usage counter: counts by key and UTC hour, last use, a flush taking everything once,
// a failed write counted again, and the bound on keys held.
import { describe, expect, it } from 'bun:test';
import { createUsageCounter, HOUR_MS, usageOutcomeOf } from '../../src/usage/counter';

const T0 = Date.parse('2026-11-22T10:15:00.000Z');
const HOUR_10 = Date.parse('2026-11-22T10:00:00.000Z');

function counter(maxKeys?: number, onFull?: () => void) {
  const time = { now: T0 };
  return { time, usage: createUsageCounter({ clock: () => time.now, maxKeys, onFull }) };
}

const zero = { valid: 0, rateLimited: 0, usageExceeded: 0, denied: 0 };

describe('usage counter', () => {
  it('counts each outcome in the key’s UTC hour', () => {
    const { usage } = counter();
    usage.record('a', 'valid');
    usage.record('a', 'valid');
    usage.record('a', 'rateLimited');
    usage.record('a', 'usageExceeded');
    usage.record('a', 'denied');
    usage.record('b', 'denied');
    expect(usage.take().rows).toEqual([
      { keyId: 'a', bucket: HOUR_10, valid: 2, rateLimited: 1, usageExceeded: 1, denied: 1 },
      { keyId: 'b', bucket: HOUR_10, ...zero, denied: 1 },
    ]);
  });

  it('starts a new row when the hour turns', () => {
    const { usage, time } = counter();
    usage.record('a', 'valid');
    time.now = HOUR_10 + HOUR_MS; // 11:00:00.000 exactly is the next hour
    usage.record('a', 'valid');
    usage.record('a', 'denied');
    expect(usage.take().rows).toEqual([
      { keyId: 'a', bucket: HOUR_10, ...zero, valid: 1 },
      { keyId: 'a', bucket: HOUR_10 + HOUR_MS, ...zero, valid: 1, denied: 1 },
    ]);
  });

  it('adds to an hour already counted when the clock is set back', () => {
    const { usage, time } = counter();
    usage.record('a', 'valid');
    time.now += HOUR_MS;
    usage.record('a', 'valid');
    time.now -= HOUR_MS;
    usage.record('a', 'valid');
    expect(usage.take().rows.map((row) => [row.bucket, row.valid])).toEqual([
      [HOUR_10, 2],
      [HOUR_10 + HOUR_MS, 1],
    ]);
  });

  it('takes the latest valid use or /key authentication as the last use; refusals are no use', () => {
    const { usage, time } = counter();
    usage.record('a', 'valid');
    time.now += 1000;
    usage.record('a', 'authenticated');
    time.now += 1000;
    usage.record('a', 'denied');
    usage.record('a', 'rateLimited');
    usage.record('b', 'denied');
    usage.record('c', 'authenticated');
    expect(usage.lastUsedAt('a')).toBe(T0 + 1000);
    expect(usage.lastUsedAt('b')).toBeUndefined();
    const batch = usage.take();
    expect(batch.lastUsed).toEqual([
      { keyId: 'a', at: T0 + 1000 },
      { keyId: 'c', at: T0 + 2000 },
    ]);
    // `authenticated` counts no verification: c has no row.
    expect(batch.rows.map((row) => row.keyId)).toEqual(['a', 'b']);
  });

  it('a flush takes everything once; the counts stay readable until its write is settled', () => {
    const { usage } = counter();
    usage.record('a', 'valid');
    const batch = usage.take();
    expect(batch.rows).toHaveLength(1);
    usage.record('a', 'denied');
    // In flight and counted since: both are the process's own until written.
    expect(usage.pendingRows('a')).toEqual([
      { keyId: 'a', bucket: HOUR_10, ...zero, valid: 1 },
      { keyId: 'a', bucket: HOUR_10, ...zero, denied: 1 },
    ]);
    expect(usage.lastUsedAt('a')).toBe(T0);
    usage.settle(true);
    expect(usage.pendingRows('a')).toEqual([{ keyId: 'a', bucket: HOUR_10, ...zero, denied: 1 }]);
    expect(usage.lastUsedAt('a')).toBeUndefined();
    expect(usage.take()).toEqual({
      rows: [{ keyId: 'a', bucket: HOUR_10, ...zero, denied: 1 }],
      lastUsed: [],
    });
    usage.settle(true);
    expect(usage.take()).toEqual({ rows: [], lastUsed: [] });
  });

  it('a failed write puts its counts back, added to those counted meanwhile', () => {
    const { usage, time } = counter();
    usage.record('a', 'valid');
    usage.take();
    time.now += 5000;
    usage.record('a', 'valid');
    usage.settle(false);
    const batch = usage.take();
    expect(batch.rows).toEqual([{ keyId: 'a', bucket: HOUR_10, ...zero, valid: 2 }]);
    expect(batch.lastUsed).toEqual([{ keyId: 'a', at: T0 + 5000 }]);
  });

  it('counts by row object as by id, at the time given: one entry per key, taken by each flush, put back by a failed write', () => {
    const { usage, time } = counter(2);
    const row = { id: 'a' };
    const refreshed = { id: 'a' }; // the key cache read the key again
    usage.recordRow(row, 'valid', time.now);
    usage.record('a', 'denied');
    usage.recordRow(refreshed, 'rateLimited', time.now);
    expect(usage.take().rows).toEqual([
      { keyId: 'a', bucket: HOUR_10, ...zero, valid: 1, rateLimited: 1, denied: 1 },
    ]);
    // Counted after the take: in this interval's entry, not the one in flight.
    time.now += 1000;
    usage.recordRow(row, 'valid', time.now);
    usage.settle(true);
    expect(usage.pendingRows('a')).toEqual([{ keyId: 'a', bucket: HOUR_10, ...zero, valid: 1 }]);
    usage.take();
    usage.recordRow(row, 'usageExceeded', time.now);
    usage.settle(false);
    // The verification's own reading of the clock, not the counter's.
    usage.recordRow(row, 'valid', T0 + HOUR_MS);
    const batch = usage.take();
    expect(batch.rows).toEqual([
      { keyId: 'a', bucket: HOUR_10, ...zero, valid: 1, usageExceeded: 1 },
      { keyId: 'a', bucket: HOUR_10 + HOUR_MS, ...zero, valid: 1 },
    ]);
    expect(batch.lastUsed).toEqual([{ keyId: 'a', at: T0 + HOUR_MS }]);
    usage.settle(true);
    // The bound holds for rows too.
    usage.recordRow({ id: 'b' }, 'valid', time.now);
    usage.recordRow({ id: 'c' }, 'valid', time.now);
    usage.recordRow({ id: 'd' }, 'valid', time.now);
    expect(usage.size).toBe(2);
    expect(usage.takeDropped()).toBe(1);
  });

  it('two counters counting the same row object keep their own counts', () => {
    const first = counter();
    const second = counter();
    const row = { id: 'a' };
    first.usage.recordRow(row, 'valid', first.time.now);
    second.usage.recordRow(row, 'denied', second.time.now);
    first.usage.recordRow(row, 'valid', first.time.now);
    expect(first.usage.take().rows).toEqual([{ keyId: 'a', bucket: HOUR_10, ...zero, valid: 2 }]);
    expect(second.usage.take().rows).toEqual([{ keyId: 'a', bucket: HOUR_10, ...zero, denied: 1 }]);
  });

  it('counts verification answers by UTC hour and code, any credential’s; they go with the first slice', () => {
    const { usage, time } = counter();
    usage.recordVerification('VALID');
    usage.recordVerification('VALID');
    usage.recordVerification('INVALID_TOKEN');
    time.now = HOUR_10 + HOUR_MS;
    usage.recordVerification('VALID');
    usage.record('a', 'valid');
    usage.record('b', 'valid');
    usage.begin();
    const first = usage.nextSlice(1);
    expect(first?.verifications).toEqual([
      { bucket: HOUR_10, code: 'VALID', count: 2 },
      { bucket: HOUR_10, code: 'INVALID_TOKEN', count: 1 },
      { bucket: HOUR_10 + HOUR_MS, code: 'VALID', count: 1 },
    ]);
    usage.sliceWritten();
    expect(usage.nextSlice(1)?.verifications).toBeUndefined();
    usage.sliceWritten();
    usage.settle(true);
    expect(usage.take()).toEqual({ rows: [], lastUsed: [] });
  });

  it('a flush of verification counts alone is one batch; a failed write puts them back', () => {
    const { usage } = counter();
    usage.recordVerification('NOT_FOUND');
    expect(usage.take()).toEqual({
      rows: [],
      lastUsed: [],
      verifications: [{ bucket: HOUR_10, code: 'NOT_FOUND', count: 1 }],
    });
    usage.recordVerification('NOT_FOUND');
    usage.settle(false);
    expect(usage.take().verifications).toEqual([{ bucket: HOUR_10, code: 'NOT_FOUND', count: 2 }]);
  });

  it('refuses a second take before the first is settled', () => {
    const { usage } = counter();
    usage.take();
    expect(() => usage.take()).toThrow('already in flight');
  });

  it('holds at most maxKeys keys: past it a new key is not counted, and an early flush is asked once', () => {
    let asked = 0;
    const { usage } = counter(2, () => asked++);
    usage.record('a', 'valid');
    usage.record('b', 'valid');
    usage.record('c', 'valid');
    usage.record('d', 'valid');
    usage.record('a', 'valid'); // a key already held still counts
    expect(usage.size).toBe(2);
    expect(asked).toBe(1);
    expect(usage.takeDropped()).toBe(2);
    expect(usage.takeDropped()).toBe(0);
    expect(usage.take().rows.map((row) => [row.keyId, row.valid])).toEqual([
      ['a', 2],
      ['b', 1],
    ]);
    usage.settle(true);
    usage.record('c', 'valid');
    usage.record('d', 'valid');
    usage.record('e', 'valid');
    expect(asked).toBe(2);
  });

  it('counts nothing for an unknown id, not even one counted before, over hours and past the bound', () => {
    const { usage, time } = counter(1);
    usage.record('a', 'denied');
    for (let hour = 0; hour < 3; hour++) {
      time.now = T0 + hour * HOUR_MS;
      usage.recordUnknown('gone');
      usage.recordUnknown('a');
    }
    expect(usage.size).toBe(1);
    expect(usage.pendingRows('gone')).toEqual([]);
    expect(usage.take()).toEqual({
      rows: [{ keyId: 'a', bucket: HOUR_10, ...zero, denied: 1 }],
      lastUsed: [],
    });
    expect(usage.takeDropped()).toBe(0);
  });

  it('maps verification codes to outcomes, any refusal to denied', () => {
    expect(usageOutcomeOf('VALID')).toBe('valid');
    expect(usageOutcomeOf('RATE_LIMITED')).toBe('rateLimited');
    expect(usageOutcomeOf('USAGE_EXCEEDED')).toBe('usageExceeded');
    for (const code of ['NOT_FOUND', 'EXPIRED', 'DISABLED', 'INSUFFICIENT_LEVEL']) {
      expect(usageOutcomeOf(code)).toBe('denied');
    }
  });
});
