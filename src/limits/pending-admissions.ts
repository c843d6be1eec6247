// Admissions taken provisionally: counted by the rate limiter for a verification that still waits
// for its credits take, which may refuse and give the admission back. A verification the limiter
// refuses while admissions on one of its counters are pending waits for those (only those: not the
// ones taken after it asked) to settle and is decided again, so a refusal for credits never turns
// another verification of this process into RATE_LIMITED (only VALID answers use a limit). Another replica's pending admissions
// are not seen here (docs/rate-limits.md).
import type { CountedLimit } from './rate-limit';

export class PendingAdmissions {
  private readonly byCounter = new Map<string, Set<Promise<void>>>();

  /** Marks an admission on `limits` as pending; the function returned settles it (after any refund). */
  hold(limits: readonly CountedLimit[]): () => void {
    const { promise, resolve } = Promise.withResolvers<void>();
    for (const { counter } of limits) {
      let pending = this.byCounter.get(counter);
      if (pending === undefined) {
        pending = new Set();
        this.byCounter.set(counter, pending);
      }
      pending.add(promise);
    }
    return () => {
      for (const { counter } of limits) {
        const pending = this.byCounter.get(counter);
        if (pending === undefined) continue;
        pending.delete(promise);
        if (pending.size === 0) this.byCounter.delete(counter);
      }
      resolve();
    };
  }

  /** Resolves once the admissions pending now on any of `limits` have settled; undefined when none is. */
  settled(limits: readonly CountedLimit[]): Promise<unknown> | undefined {
    if (this.byCounter.size === 0) return undefined;
    const waits: Promise<void>[] = [];
    for (const { counter } of limits) {
      const pending = this.byCounter.get(counter);
      if (pending !== undefined) waits.push(...pending);
    }
    return waits.length === 0 ? undefined : Promise.all(waits);
  }
}
