// The rate limit's counting rule, free of any storage: a window of `duration` cut into SUB_WINDOWS
// sub-windows, each keeping how many verifications it admitted and when it admitted the latest. A
// sub-window holds its admissions while `latest + duration > now`, so every admission made in the last
// `duration` is still counted (no rolling window ever holds more than `limit`), and a key idle for
// `duration` has its whole limit back. An admission may be held up to one sub-window (duration / 20)
// longer than an exact log would hold it: the throughput lost under overload is at most 1/21.
// At most SUB_WINDOWS + 1 sub-windows are live at any moment (their epochs are distinct and lie in
// (now/w - SUB_WINDOWS - 1, now/w]), so a window's memory is bounded whatever the traffic.

export const SUB_WINDOWS = 20;

export type SubWindow = {
  /** floor(admission time / sub-window length): which sub-window of time this is. */
  epoch: number;
  /** Admissions still counted (a refund takes one back). */
  count: number;
  /** ms of the latest admission in it. */
  latest: number;
};

export type WindowState = {
  readonly limit: number;
  readonly durationMs: number;
  /** Ascending by epoch (and so by latest). */
  subWindows: SubWindow[];
};

export function newWindow(limit: number, durationMs: number): WindowState {
  return { limit, durationMs, subWindows: [] };
}

export const subWindowMs = (durationMs: number) => durationMs / SUB_WINDOWS;

const holds = (state: WindowState, sub: SubWindow, now: number) =>
  sub.count > 0 && sub.latest + state.durationMs > now;

/** Drops the sub-windows that no longer hold anything. */
export function prune(state: WindowState, now: number): void {
  // Called on every admission: a new array only when there is something to drop.
  if (state.subWindows.every((sub) => holds(state, sub, now))) return;
  state.subWindows = state.subWindows.filter((sub) => holds(state, sub, now));
}

/** Admissions that still count against the limit at `now`. */
export function used(state: WindowState, now: number): number {
  let total = 0;
  for (const sub of state.subWindows) if (holds(state, sub, now)) total += sub.count;
  return total;
}

/** Whether nothing is held any more: the window can be forgotten without changing any answer. */
export function isIdle(state: WindowState, now: number): boolean {
  // Every verification sweeps a few windows: stop at the first sub-window that holds.
  for (const sub of state.subWindows) if (holds(state, sub, now)) return false;
  return true;
}

/**
 * Counts one admission at `now` when the limit allows it; the epoch it went to (for a refund), or
 * undefined when refused (a refusal changes nothing).
 */
export function admit(state: WindowState, now: number): number | undefined {
  prune(state, now);
  if (used(state, now) >= state.limit) return undefined;
  const epoch = Math.floor(now / subWindowMs(state.durationMs));
  const last = state.subWindows.at(-1);
  // A clock that stepped back lands in the newest sub-window: it is then held a little longer, never less.
  if (last !== undefined && epoch <= last.epoch) {
    last.count += 1;
    last.latest = Math.max(last.latest, now);
    return last.epoch;
  }
  state.subWindows.push({ epoch, count: 1, latest: now });
  return epoch;
}

/** Gives back one admission counted in `epoch` (a verification that passed the limit but was refused later). */
export function refund(state: WindowState, epoch: number): void {
  const sub = state.subWindows.find((candidate) => candidate.epoch === epoch);
  if (sub !== undefined && sub.count > 0) sub.count -= 1;
}

/** ms when the whole limit is available again if nothing more arrives (`now` when it already is). */
export function resetAt(state: WindowState, now: number): number {
  let reset = now;
  for (const sub of state.subWindows) {
    if (holds(state, sub, now)) reset = Math.max(reset, sub.latest + state.durationMs);
  }
  return reset;
}

/** ms when one more verification could pass (`now` when one can already). */
export function nextAdmissionAt(state: WindowState, now: number): number {
  let excess = used(state, now) - state.limit + 1;
  if (excess <= 0) return now;
  // Sub-windows stop holding in the order of their latest admission, which is their order here.
  for (const sub of state.subWindows) {
    if (!holds(state, sub, now)) continue;
    excess -= sub.count;
    if (excess <= 0) return sub.latest + state.durationMs;
  }
  return resetAt(state, now);
}
