// The rate limit's four rules, over random arrival times on a fixed clock (fast-check, fixed seed):
// a burst from idle gets exactly `limit`; a key idle for `duration` has its whole limit back; a steady
// overload gets between the floor the algorithm guarantees (and 90 % of the limit's rate) and
// `limit × (T/duration + 1)`; refusals and checks use nothing, and a refund gives the slot back.
// Underneath them all: no rolling window of `duration` ever holds more than `limit` admissions.
import { describe, expect, it } from 'bun:test';
import fc from 'fast-check';
import { MemoryRateLimiter } from '../../src/limits/memory-rate-limiter';
import type { CountedLimit } from '../../src/limits/rate-limit';
import { SUB_WINDOWS } from '../../src/limits/sliding-window';

const RUNS = { seed: 20261125, numRuns: 200 };

function limiterAt(start = 1_700_000_000_000) {
  const time = { now: start };
  return { time, limiter: new MemoryRateLimiter(() => time.now) };
}

const rule = fc.record({
  limit: fc.integer({ min: 1, max: 60 }),
  duration: fc.integer({ min: 1, max: 20 }),
});

/** Admission times of `arrivals` (absolute ms, non-decreasing) under one limit. */
function admitted(limit: CountedLimit, arrivals: readonly number[]): number[] {
  const { time, limiter } = limiterAt(0);
  const times: number[] = [];
  for (const at of arrivals) {
    time.now = at;
    if (limiter.consume([limit]).allowed) times.push(at);
  }
  return times;
}

/** Arrival times from gaps. */
const timesOf = (start: number, gaps: readonly number[]) => {
  let at = start;
  return gaps.map((gap) => (at += gap));
};

describe('the in-memory rate limiter', () => {
  it('never admits more than `limit` in any rolling window of `duration`', () => {
    fc.assert(
      fc.property(
        rule,
        fc.array(fc.integer({ min: 0, max: 3_000 }), { minLength: 1, maxLength: 400 }),
        ({ limit, duration }, gaps) => {
          const times = admitted({ counter: 'k', limit, duration }, timesOf(1_000_000, gaps));
          for (const [i, t] of times.entries()) {
            const inWindow = times.slice(0, i + 1).filter((earlier) => earlier > t - duration * 1000);
            expect(inWindow.length).toBeLessThanOrEqual(limit);
          }
        },
      ),
      RUNS,
    );
  });

  it('rule 1: a burst of limit + k well within `duration`, from idle, gets exactly `limit`', () => {
    fc.assert(
      fc.property(
        rule,
        fc.integer({ min: 0, max: 50 }),
        fc.array(fc.integer({ min: 0, max: 5_000 }), { maxLength: 100 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.array(fc.double({ min: 0, max: 0.999, noNaN: true }), { minLength: 200, maxLength: 200 }),
        ({ limit, duration }, k, historyGaps, idleExtra, offsets) => {
          const { time, limiter } = limiterAt();
          const limits = [{ counter: 'k', limit, duration }];
          const history = timesOf(time.now, historyGaps);
          for (const at of history) {
            time.now = at;
            limiter.consume(limits);
          }
          // Idle for at least `duration`, then limit + k verifications within less than `duration`.
          const start = time.now + duration * 1000 + idleExtra;
          const burst = offsets
            .slice(0, limit + k)
            .map((offset) => start + Math.floor(offset * duration * 1000))
            .sort((a, b) => a - b);
          let allowed = 0;
          let refused = 0;
          for (const at of burst) {
            time.now = at;
            if (limiter.consume(limits).allowed) allowed++;
            else refused++;
          }
          expect(allowed).toBe(limit);
          expect(refused).toBe(k);
        },
      ),
      RUNS,
    );
  });

  it('rule 2: `duration` after the last admission the whole limit is available again', () => {
    fc.assert(
      fc.property(
        rule,
        fc.array(fc.integer({ min: 0, max: 4_000 }), { minLength: 1, maxLength: 200 }),
        ({ limit, duration }, gaps) => {
          const { time, limiter } = limiterAt();
          const limits = [{ counter: 'k', limit, duration }];
          let lastAdmission = time.now;
          for (const at of timesOf(time.now, gaps)) {
            time.now = at;
            if (limiter.consume(limits).allowed) lastAdmission = at;
          }
          time.now = lastAdmission + duration * 1000;
          const verdict = limiter.check(limits);
          expect(verdict.reported.remaining).toBe(limit);
          expect(verdict.reported.reset).toBe(time.now);
          for (let i = 0; i < limit; i++) expect(limiter.consume(limits).allowed).toBe(true);
          expect(limiter.consume(limits).allowed).toBe(false);
        },
      ),
      RUNS,
    );
  });

  it('rule 3: a steady overload for T gets at most limit × (T/duration + 1) and at least the floor', () => {
    fc.assert(
      fc.property(
        rule,
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.double({ min: 0.05, max: 1, noNaN: true }), { minLength: 2_000, maxLength: 2_000 }),
        ({ limit, duration }, periods, fractions) => {
          const d = duration * 1000;
          // The longest gap between arrivals: at least limit / duration arrive per second at all times.
          const maxGap = Math.max(1, Math.floor(d / limit));
          const spanMs = periods * d;
          const arrivals: number[] = [0];
          for (let i = 0; (arrivals.at(-1) as number) < spanMs; i++) {
            const gap = Math.max(1, Math.round(maxGap * (fractions[i % fractions.length] as number)));
            arrivals.push((arrivals.at(-1) as number) + gap);
          }
          const T = arrivals.at(-1) as number;
          const allowed = admitted({ counter: 'k', limit, duration }, arrivals).length;
          expect(allowed).toBeLessThanOrEqual(limit * (T / d + 1));
          // The floor this algorithm guarantees (docs/rate-limits.md derives it): limit × (T − p)/(d + w + p),
          // w the sub-window, p the longest gap.
          const floor = (limit * (T - maxGap)) / (d + d / SUB_WINDOWS + maxGap);
          expect(allowed).toBeGreaterThanOrEqual(Math.floor(floor));
          // Which is above 90 % of the limit's rate once the limit is 30 or more over a few durations.
          if (limit >= 30 && periods >= 5) expect(allowed).toBeGreaterThanOrEqual((0.9 * limit * T) / d);
        },
      ),
      { ...RUNS, numRuns: 100 },
    );
  });

  it('rule 4: a refusal or a check changes nothing, and a refund gives the slot back at once', () => {
    fc.assert(
      fc.property(
        rule,
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2_000 }), fc.boolean()), {
          minLength: 1,
          maxLength: 300,
        }),
        ({ limit, duration }, steps) => {
          const { time, limiter } = limiterAt();
          const limits = [{ counter: 'k', limit, duration }];
          for (const [gap, refundIt] of steps) {
            time.now += gap;
            const before = limiter.check(limits);
            expect(limiter.check(limits)).toEqual(before);
            const verdict = limiter.consume(limits);
            expect(verdict.allowed).toBe(before.allowed);
            if (!verdict.allowed) {
              expect(limiter.check(limits)).toEqual(before);
            } else {
              expect(verdict.reported.remaining).toBe(before.reported.remaining - 1);
              if (refundIt) {
                limiter.refund(limits, verdict.ticket ?? []);
                expect(limiter.check(limits).reported.remaining).toBe(before.reported.remaining);
              }
            }
          }
        },
      ),
      RUNS,
    );
  });
});
