// The rate limit's counting rule, free of any storage: a window of `duration` cut into SUB_WINDOWS
// sub-windows, each keeping how many verifications it admitted and when it admitted the latest. A
// sub-window holds its admissions while `latest + duration > now`, so every admission made in the last
// `duration` is still counted (no rolling window ever holds more than `limit`), and a key idle for
// `duration` has its whole limit back. An admission may be held up to one sub-window (duration / 20)
// longer than an exact log would hold it: the throughput lost under overload is at most 1/21.
// At most SUB_WINDOWS + 1 sub-windows are live at any moment (their epochs are distinct and lie in
// (now/w - SUB_WINDOWS - 1, now/w]), so a window's memory is bounded whatever the traffic.

export const SUB_WINDOWS = 20;

/**
 * One counter's window. Its sub-windows sit in one flat array of numbers, three a sub-window (EPOCH,
 * COUNT, LATEST: floor(admission time / sub-window length), the admissions still counted (a refund
 * takes one back), and the ms of the latest), ascending by epoch and so by latest: a verification
 * reads one contiguous run of memory, not a score of objects scattered over the heap (with 10k keys in
 * rotation, their cache misses were most of the limiter's cost). `held` is the sum of their counts, so
 * the count against the limit is read without a pass over them.
 */
export type WindowState = {
  readonly limit: number;
  readonly durationMs: number;
  subWindows: number[];
  held: number;
};

const EPOCH = 0;
const COUNT = 1;
const LATEST = 2;
const FIELDS = 3;

export function newWindow(limit: number, durationMs: number): WindowState {
  return { limit, durationMs, subWindows: [], held: 0 };
}

export const subWindowMs = (durationMs: number) => durationMs / SUB_WINDOWS;

/** How many sub-windows the window keeps. */
export const subWindowCount = (state: WindowState) => state.subWindows.length / FIELDS;

/**
 * Drops the sub-windows at the front that no longer hold anything. Their latest admissions ascend, so
 * once the first one holds, every later one was admitted within `duration` too: afterwards `held`
 * counts exactly the admissions that still hold (a sub-window emptied by refunds adds nothing).
 */
export function prune(state: WindowState, now: number): void {
  const subs = state.subWindows;
  let dropped = 0;
  while (
    dropped < subs.length &&
    ((subs[dropped + COUNT] as number) === 0 || (subs[dropped + LATEST] as number) + state.durationMs <= now)
  ) {
    state.held -= subs[dropped + COUNT] as number;
    dropped += FIELDS;
  }
  if (dropped === 0) return;
  subs.copyWithin(0, dropped);
  subs.length -= dropped;
}

/** Admissions that still count against the limit at `now`. */
export function used(state: WindowState, now: number): number {
  prune(state, now);
  return state.held;
}

/** Whether nothing is held any more: the window can be forgotten without changing any answer. */
export function isIdle(state: WindowState, now: number): boolean {
  return used(state, now) === 0;
}

/**
 * Counts one admission at `now` when the limit allows it; the epoch it went to (for a refund), or
 * undefined when refused (a refusal changes nothing).
 */
export function admit(state: WindowState, now: number): number | undefined {
  if (used(state, now) >= state.limit) return undefined;
  const epoch = Math.floor(now / subWindowMs(state.durationMs));
  const subs = state.subWindows;
  // Sub-windows emptied by refunds at the end are dropped, so a stepped-back clock's admission goes to
  // the newest one that still counts.
  while (subs.length > 0 && subs[subs.length - FIELDS + COUNT] === 0) subs.length -= FIELDS;
  const last = subs.length - FIELDS;
  state.held += 1;
  // A clock that stepped back lands in the newest sub-window: it is then held a little longer, never less.
  if (last >= 0 && epoch <= (subs[last + EPOCH] as number)) {
    subs[last + COUNT] = (subs[last + COUNT] as number) + 1;
    if (now > (subs[last + LATEST] as number)) subs[last + LATEST] = now;
    return subs[last + EPOCH] as number;
  }
  subs.push(epoch, 1, now);
  return epoch;
}

/** Gives back one admission counted in `epoch` (a verification that passed the limit but was refused later). */
export function refund(state: WindowState, epoch: number): void {
  const subs = state.subWindows;
  for (let at = 0; at < subs.length; at += FIELDS) {
    if (subs[at + EPOCH] !== epoch) continue;
    const count = subs[at + COUNT] as number;
    if (count > 0) {
      subs[at + COUNT] = count - 1;
      state.held -= 1;
    }
    return;
  }
}

/** ms when the whole limit is available again if nothing more arrives (`now` when it already is). */
export function resetAt(state: WindowState, now: number): number {
  prune(state, now);
  // The last sub-window still counting holds the latest admission.
  const subs = state.subWindows;
  for (let at = subs.length - FIELDS; at >= 0; at -= FIELDS) {
    if ((subs[at + COUNT] as number) > 0)
      return Math.max(now, (subs[at + LATEST] as number) + state.durationMs);
  }
  return now;
}

/** ms when one more verification could pass (`now` when one can already). */
export function nextAdmissionAt(state: WindowState, now: number): number {
  let excess = used(state, now) - state.limit + 1;
  if (excess <= 0) return now;
  // Sub-windows stop holding in the order of their latest admission, which is their order here.
  const subs = state.subWindows;
  for (let at = 0; at < subs.length; at += FIELDS) {
    excess -= subs[at + COUNT] as number;
    if (excess <= 0) return (subs[at + LATEST] as number) + state.durationMs;
  }
  return resetAt(state, now);
}
