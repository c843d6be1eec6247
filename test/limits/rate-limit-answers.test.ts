// What a rate-limited verification is told: remaining, reset (when the whole limit is back) and the
// whole seconds until one can pass, on a fixed clock; the limit reported when two apply; a changed or
// forgotten rule starting afresh; and idle counters dropped so memory stays bounded.
import { describe, expect, it } from 'bun:test';
import { MemoryRateLimiter } from '../../src/limits/memory-rate-limiter';
import {
  consumeIfLimited,
  type LimitState,
  limitsOfKey,
  type RateLimiter,
  reportedLimit,
} from '../../src/limits/rate-limit';
import { subWindowCount, type WindowState } from '../../src/limits/sliding-window';

const T0 = 1_700_000_000_000;

function limiterAt(start = T0) {
  const time = { now: start };
  return { time, limiter: new MemoryRateLimiter(() => time.now) };
}

describe('the answer of a rate-limited verification', () => {
  // 3 per 10 s; sub-windows of 500 ms. Each row: ms after T0, expected allowed, remaining, reset (ms
  // after T0) and retryAfter.
  const rows: [number, boolean, number, number, number][] = [
    [0, true, 2, 10_000, 1],
    [1_000, true, 1, 11_000, 1],
    [2_000, true, 0, 12_000, 8], // the first admission frees its slot at 10 000
    [3_000, false, 0, 12_000, 7],
    [9_999, false, 0, 12_000, 1], // 1 ms to go is still a whole second
    [10_000, true, 0, 20_000, 1], // the slot of 0 came back, and is taken again
    [10_500, false, 0, 20_000, 1],
    [12_000, true, 1, 22_000, 1],
    [40_000, true, 2, 50_000, 1], // idle for a whole duration: all 3 back, one taken
  ];
  it.each(rows)(
    'at +%d ms: allowed %p, remaining %d, reset +%d ms, retryAfter %d s',
    (at, allowed, remaining, reset, retry) => {
      // Replays the rows up to this one on a fresh limiter.
      const { time, limiter } = limiterAt();
      const limits = [{ counter: 'k', limit: 3, duration: 10 }];
      for (const [earlier] of rows.filter(([t]) => t < at)) {
        time.now = T0 + earlier;
        limiter.consume(limits);
      }
      time.now = T0 + at;
      const verdict = limiter.consume(limits);
      expect(verdict.allowed).toBe(allowed);
      expect(verdict.reported).toMatchObject({ limit: 3, duration: 10, remaining, reset: T0 + reset });
      expect(verdict.retryAfterSeconds).toBe(retry);
      expect(verdict.now).toBe(T0 + at);
      expect(verdict.ticket !== undefined).toBe(allowed);
    },
  );

  it('holds admissions of one sub-window until its latest is a duration old', () => {
    const { time, limiter } = limiterAt();
    const limits = [{ counter: 'k', limit: 2, duration: 10 }];
    limiter.consume(limits);
    time.now = T0 + 400; // the same 500 ms sub-window
    limiter.consume(limits);
    time.now = T0 + 10_000;
    const held = limiter.check(limits);
    expect(held).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    expect(held.reported).toMatchObject({ remaining: 0, reset: T0 + 10_400, nextAdmission: T0 + 10_400 });
    time.now = T0 + 10_400;
    expect(limiter.check(limits).reported.remaining).toBe(2);
  });

  it('reports the limit with the fewer remaining, and waits for the later of two to let one through', () => {
    const { time, limiter } = limiterAt();
    const own = { counter: 'key', limit: 5, duration: 10 };
    const operator = { counter: 'operator', limit: 3, duration: 60 };
    const first = limiter.consume([own, operator]);
    expect(first.reported).toMatchObject({ limit: 3, duration: 60, remaining: 2, reset: T0 + 60_000 });
    limiter.consume([own, operator]);
    limiter.consume([own, operator]);
    time.now = T0 + 5_000;
    const refused = limiter.consume([own, operator]);
    expect(refused.allowed).toBe(false);
    expect(refused.reported).toMatchObject({ limit: 3, remaining: 0 });
    expect(refused.retryAfterSeconds).toBe(55);
    // The key's own limit was not used by the refusal: 2 of its 5 are still free under it alone.
    expect(limiter.check([own]).reported.remaining).toBe(2);
  });

  it('counts on no limit when one of them refuses', () => {
    const { limiter } = limiterAt();
    const own = { counter: 'key', limit: 1, duration: 10 };
    const operator = { counter: 'operator', limit: 100, duration: 10 };
    expect(limiter.consume([own, operator]).allowed).toBe(true);
    expect(limiter.consume([own, operator]).allowed).toBe(false);
    expect(limiter.check([operator]).reported.remaining).toBe(99);
  });

  it('with two equal remaining, reports the one whose whole limit comes back last', () => {
    const state = (remaining: number, reset: number): LimitState => ({
      limit: 10,
      duration: 10,
      remaining,
      reset,
      nextAdmission: 0,
    });
    expect(reportedLimit([state(0, 5), state(0, 9), state(1, 99)])).toEqual(state(0, 9));
    expect(reportedLimit([state(3, 5)])).toEqual(state(3, 5));
    expect(() => reportedLimit([])).toThrow();
  });

  it('refunds only on the rule the ticket was counted under', () => {
    const { limiter } = limiterAt();
    const limits = [{ counter: 'k', limit: 2, duration: 10 }];
    const { ticket } = limiter.consume(limits);
    const changed = [{ counter: 'k', limit: 5, duration: 10 }];
    limiter.consume(changed); // the rule changed: its counts start afresh
    limiter.refund(limits, ticket ?? []);
    expect(limiter.check(changed).reported.remaining).toBe(4);
  });

  it('starts a forgotten counter afresh', () => {
    const { limiter } = limiterAt();
    const limits = [{ counter: 'k', limit: 1, duration: 10 }];
    limiter.consume(limits);
    expect(limiter.check(limits).allowed).toBe(false);
    limiter.forget(['k']);
    expect(limiter.check(limits).allowed).toBe(true);
  });
});

describe('which limits a key is under', () => {
  it('gives each limit its own counter and says whose it is, and a key without any never reaches the limiter', () => {
    const operator = { limit: 100, duration: 60 };
    expect(limitsOfKey({ lineage: 'kg_1', userId: 7, own: { limit: 5, duration: 10 }, operator })).toEqual([
      { counter: 'key:kg_1', scope: 'key', limit: 5, duration: 10 },
      { counter: 'operator:kg_1', scope: 'operator', limit: 100, duration: 60 },
    ]);
    expect(limitsOfKey({ lineage: 'kg_1', userId: 7, operator })).toEqual([
      { counter: 'operator:kg_1', scope: 'operator', limit: 100, duration: 60 },
    ]);
    expect(limitsOfKey({ lineage: 'kg_1', userId: 7, user: { limit: 9, duration: 1 } })).toEqual([
      { counter: 'user:7', scope: 'user', limit: 9, duration: 1 },
    ]);
    const untouchable = new Proxy({} as RateLimiter, {
      get: () => {
        throw new Error('the limiter was used for a key without limits');
      },
    });
    expect(consumeIfLimited(untouchable, limitsOfKey({ lineage: 'kg_1', userId: 7 }))).toBeUndefined();
    const { limiter } = limiterAt();
    expect(
      consumeIfLimited(limiter, limitsOfKey({ lineage: 'kg_1', userId: 7, own: { limit: 1, duration: 1 } })),
    ).toMatchObject({
      allowed: true,
    });
  });
});

describe('the limiter memory', () => {
  it('drops idle counters as new ones are added, keeping at most about twice those in use, and all of them on sweep()', () => {
    const { time, limiter } = limiterAt();
    for (let i = 0; i < 100; i++) limiter.consume([{ counter: `k${i}`, limit: 5, duration: 1 }]);
    expect(limiter.size).toBe(100);
    // A check of an unknown counter keeps nothing.
    limiter.check([{ counter: 'never-used', limit: 5, duration: 1 }]);
    expect(limiter.size).toBe(100);
    time.now += 1_000;
    // Every counter is idle now; verifications of a counter already kept look at no other.
    for (let i = 0; i < 96; i++) limiter.consume([{ counter: 'k0', limit: 5, duration: 1 }]);
    expect(limiter.size).toBe(100);
    // 50 new counters a second, each used once: each one added looks at two others (64 every 32nd),
    // so the idle ones go and the Map holds at most about twice the 50 in use (and a batch).
    const sizes: number[] = [];
    for (let second = 0; second < 20; second++) {
      time.now += 1_000;
      for (let i = 0; i < 50; i++) limiter.consume([{ counter: `s${second}-${i}`, limit: 5, duration: 1 }]);
      sizes.push(limiter.size);
    }
    expect(Math.max(...sizes.slice(2))).toBeLessThanOrEqual(2 * 50 + 64);
    expect(limiter.check([{ counter: 'k1', limit: 5, duration: 1 }]).reported.remaining).toBe(5);
    time.now += 1_000;
    for (let i = 0; i < 10; i++) limiter.consume([{ counter: `j${i}`, limit: 5, duration: 1 }]);
    const kept = limiter.size;
    time.now += 999;
    limiter.sweep();
    expect(limiter.size).toBe(10);
    expect(kept).toBeGreaterThan(10);
    time.now += 1;
    limiter.sweep();
    expect(limiter.size).toBe(0);
  });

  it('counts a kept limit (consumeKept) on the same window as any list of its counter, across forgets, sweeps and rule changes', () => {
    const { time, limiter } = limiterAt();
    const rule = { counter: 'key:kg_1', limit: 5, duration: 1 };
    // A key's own limit, kept with its row and passed on every call; and the same counter in a list
    // made anew (a key under several limits, or another row of the lineage).
    const kept = { ...rule };
    const keptLeft = () => limiter.consumeKept(kept).reported.remaining;
    const listLeft = (limit = rule) => limiter.consume([{ ...limit }]).reported.remaining;
    expect([keptLeft(), keptLeft(), listLeft(), keptLeft()]).toEqual([4, 3, 2, 1]);
    // What the limiter remembers on a limit (one symbol property) is hidden from its readers.
    expect(Object.getOwnPropertySymbols(kept)).toHaveLength(1);
    expect(Object.keys(kept)).toEqual(['counter', 'limit', 'duration']);
    expect(JSON.stringify(kept)).toBe(JSON.stringify(rule));
    // Forgotten: both start afresh, on one window again.
    limiter.forget(['key:kg_1']);
    expect([keptLeft(), listLeft()]).toEqual([4, 3]);
    // Swept once idle: the kept limit's next admission is in the Map, where a list finds it.
    time.now += 1_000;
    limiter.sweep();
    expect(limiter.size).toBe(0);
    expect([keptLeft(), listLeft(), limiter.size]).toEqual([4, 3, 1]);
    // Another rule on the counter starts it afresh, and the kept limit then starts afresh too.
    const tighter = { ...rule, limit: 3 };
    expect([listLeft(tighter), listLeft(tighter), keptLeft(), listLeft()]).toEqual([2, 1, 4, 3]);
    // A limit that cannot take a property (frozen) is counted through the Map.
    const sealed = Object.freeze({ ...rule });
    expect([limiter.consumeKept(sealed).reported.remaining, keptLeft()]).toEqual([2, 1]);
    expect(limiter.check([{ ...rule }]).reported.remaining).toBe(1);
  });

  it('never drops a window a call is counting on, however the sweeps fall', () => {
    const { time, limiter } = limiterAt();
    // One admission a second on `shared`, each call also under a counter of its own, so every call
    // adds a window and the sweeps fall on every call position in turn; `shared` is idle when each
    // second begins.
    const admittedPerSecond: number[] = [];
    for (let second = 0; second < 80; second++) {
      let admitted = 0;
      for (let call = 0; call < 33; call++) {
        const limits = [
          { counter: 'shared', limit: 1, duration: 1 },
          { counter: `own:${second}:${call}`, limit: 100, duration: 1 },
        ];
        if (limiter.consume(limits).allowed) admitted++;
        time.now += 1;
      }
      admittedPerSecond.push(admitted);
      time.now += 1_000;
    }
    expect(admittedPerSecond).toEqual(Array(80).fill(1));
  });

  it('keeps at most 21 sub-windows per counter under any traffic', () => {
    const { time, limiter } = limiterAt();
    const limits = [{ counter: 'k', limit: 1_000_000, duration: 10 }];
    for (let i = 0; i < 5_000; i++) {
      time.now += 97;
      limiter.consume(limits);
    }
    const windows = (limiter as unknown as { windows: Map<string, WindowState> }).windows;
    const window = windows.get('k');
    expect(window && subWindowCount(window)).toBeGreaterThan(15);
    expect(window && subWindowCount(window)).toBeLessThanOrEqual(21);
  });
});
