// The rate limiter of one process: sliding windows in a Map, on an injected clock. Bun runs this on one
// thread, so a check and the count that follows it cannot interleave with another request's.
//
// Memory: one window per counter admitted within its duration, each at most SUB_WINDOWS + 1
// sub-windows (three numbers each). A window idle for its duration answers exactly as an absent one, so
// it is dropped: each window added sweeps SWEEP_STEP others for idleness (SWEEP_EVERY additions'
// worth at once, in one pass, at the start of the next call, before it holds any window: stepping
// the Map's iterator call by call cost a tenth of the limiter's time), and `sweep()` (for a timer)
// drops all idle ones. Over one pass through the Map, which takes size / SWEEP_STEP additions, every
// window idle when the pass began is dropped, so the Map holds at most about
// SWEEP_STEP / (SWEEP_STEP - 1) = twice the windows admitted to within their duration. Traffic that
// adds no window sweeps nothing: a sweep reads windows nobody is asking for, one cache miss each,
// which cost more than a verification's own counting.
//
// A limit passed to `consumeKept` (one its caller keeps and passes again: a key's own limit, kept
// with its row) remembers the window it was counted on, in a hidden property of this limiter's, so
// the next call reaches the window without the Map's lookup (with 10k keys in rotation, its cache
// misses were a third of a verification's counting); a window dropped from the Map says so, and is
// then looked up again.
import type { Clock } from '../core/clock';
import {
  type CountedLimit,
  type LimitState,
  type RateLimiter,
  type RateLimitTicket,
  type RateLimitVerdict,
  verdictOf,
} from './rate-limit';
import {
  admit,
  isIdle,
  newWindow,
  nextAdmissionAt,
  refund,
  resetAt,
  used,
  type WindowState,
} from './sliding-window';

/** Windows examined for idleness per window added, so the Map's size stays bounded without a timer. */
const SWEEP_STEP = 2;
/** How many additions' sweeping is done at once. */
const SWEEP_EVERY = 32;

/** A window as this limiter keeps it: `dropped` once it left the Map (a limit remembering it looks again). */
type KeptWindow = WindowState & { dropped: boolean };

export class MemoryRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, KeptWindow>();
  private sweepCursor: MapIterator<[string, KeptWindow]> | undefined;
  /** The hidden property of a kept limit holding its window: this limiter's own. */
  private readonly remembered = Symbol('window');
  private addedSinceSweep = 0;

  constructor(private readonly clock: Clock) {}

  /** Counters currently kept (for tests and a gauge). */
  get size(): number {
    return this.windows.size;
  }

  check(limits: readonly CountedLimit[]): RateLimitVerdict {
    const now = this.clock();
    this.sweepIfDue(now);
    const windows = limits.map((limit) => this.windowOf(limit, false, false));
    const allowed = windows.every((window) => used(window, now) < window.limit);
    return verdictOf(
      allowed,
      windows.map((window) => stateOf(window, now)),
      now,
    );
  }

  consume(limits: readonly CountedLimit[]): RateLimitVerdict {
    // Plain loops, each window's count read once: this runs on every verification of a limited key.
    const now = this.clock();
    this.sweepIfDue(now);
    const count = limits.length;
    if (count === 1) return this.consumeOne(limits[0] as CountedLimit, now, false);
    const windows: WindowState[] = new Array(count);
    let allowed = true;
    for (let i = 0; i < count; i++) {
      const window = this.windowOf(limits[i] as CountedLimit, true, false);
      windows[i] = window;
      if (used(window, now) >= window.limit) allowed = false;
    }
    let ticket: { counter: string; epoch: number }[] | undefined;
    if (allowed) {
      ticket = new Array(count);
      for (let i = 0; i < count; i++) {
        // Cannot be refused: every window was just seen below its limit.
        ticket[i] = {
          counter: (limits[i] as CountedLimit).counter,
          epoch: admit(windows[i] as WindowState, now) as number,
        };
      }
    }
    const states: LimitState[] = new Array(count);
    for (let i = 0; i < count; i++) states[i] = stateOf(windows[i] as WindowState, now);
    return verdictOf(allowed, states, now, ticket);
  }

  consumeKept(limit: CountedLimit): RateLimitVerdict {
    const now = this.clock();
    this.sweepIfDue(now);
    return this.consumeOne(limit, now, true);
  }

  /** `consume` of a single limit (most limited keys: their own), without the lists of several. */
  private consumeOne(limit: CountedLimit, now: number, kept: boolean): RateLimitVerdict {
    const window = this.windowOf(limit, true, kept);
    const epoch = admit(window, now);
    const ticket = epoch === undefined ? undefined : [{ counter: limit.counter, epoch }];
    return verdictOf(epoch !== undefined, [stateOf(window, now)], now, ticket);
  }

  refund(limits: readonly CountedLimit[], ticket: RateLimitTicket): void {
    for (const { counter, epoch } of ticket) {
      const limit = limits.find((candidate) => candidate.counter === counter);
      const window = this.windows.get(counter);
      if (limit !== undefined && window !== undefined && sameRule(window, limit)) refund(window, epoch);
    }
  }

  forget(counters: readonly string[]): void {
    for (const counter of counters) this.drop(counter);
  }

  /** Drops every idle window. */
  sweep(): void {
    const now = this.clock();
    for (const [counter, window] of this.windows) if (isIdle(window, now)) this.drop(counter, window);
  }

  /** Sweeps SWEEP_STEP windows for each one added since the last sweep, once SWEEP_EVERY were. */
  private sweepIfDue(now: number): void {
    if (this.addedSinceSweep < SWEEP_EVERY) return;
    this.addedSinceSweep = 0;
    let budget = SWEEP_EVERY * SWEEP_STEP;
    this.sweepCursor ??= this.windows.entries();
    // A Map iterator survives deletions, and a `break` leaves it where it was for the next sweep.
    for (const [counter, window] of this.sweepCursor) {
      if (isIdle(window, now)) this.drop(counter, window);
      if (--budget === 0) return;
    }
    this.sweepCursor = undefined;
  }

  /**
   * The counter's window: the one `limit` remembers (when `kept`), else the Map's; a fresh one when it
   * has none or its rule changed, stored only when `keep` (and counted for the next sweep).
   */
  private windowOf(limit: CountedLimit, keep: boolean, kept: boolean): WindowState {
    const remembering = limit as Remembering;
    const remembered = kept ? remembering[this.remembered] : undefined;
    if (remembered !== undefined && !remembered.dropped) return remembered;
    const existing = this.windows.get(limit.counter);
    let window: KeptWindow;
    if (existing !== undefined && sameRule(existing, limit)) window = existing;
    else {
      window = { ...newWindow(limit.limit, limit.duration * 1000), dropped: false };
      if (!keep) return window;
      this.addedSinceSweep++;
      if (existing !== undefined) existing.dropped = true;
      this.windows.set(limit.counter, window);
    }
    if (kept && Object.isExtensible(limit))
      Object.defineProperty(limit, this.remembered, { value: window, writable: true, configurable: true });
    return window;
  }

  private drop(counter: string, window = this.windows.get(counter)): void {
    if (window === undefined) return;
    window.dropped = true;
    this.windows.delete(counter);
  }
}

type Remembering = CountedLimit & { [remembered: symbol]: KeptWindow | undefined };

const sameRule = (window: WindowState, limit: CountedLimit) =>
  window.limit === limit.limit && window.durationMs === limit.duration * 1000;

function stateOf(window: WindowState, now: number): LimitState {
  return {
    limit: window.limit,
    duration: window.durationMs / 1000,
    remaining: Math.max(0, window.limit - used(window, now)),
    reset: resetAt(window, now),
    nextAdmission: nextAdmissionAt(window, now),
  };
}
