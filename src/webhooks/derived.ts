// The derived events: not a change anyone asked for but a moment keygate notices. key.expiring
// once at each lead time before a key's expiry (a scan of keys entering a lead window), key.rate_limited
// at most once per key per minute, key.credits_exhausted at the first USAGE_EXCEEDED of a credit cycle
// and key.credits_low once per cycle when the remaining credits fall below 10 % of what the cycle
// began with. Each is written with a mark in one transaction (WebhookStore.writeOnce), so it goes
// once whichever replica notices first; a small memory of marks spares the database repeats.

import { summaryOf } from '../apikeys/service';
import { lineageOf } from '../apikeys/settings';
import type { ApiKeyRow } from '../apikeys/store';
import type { Clock } from '../core/clock';
import type { Logger } from '../core/log';
import { effectiveCredits, nextRefillAt } from '../limits/credits';
import { leadText } from './lead-times';
import type { Outbox } from './outbox';
import type { WebhookStore } from './store';

const MINUTE = 60_000;
/** Keys handled per lead per scan query; the scan goes on until none are left. */
const SCAN_BATCH = 100;
/** How many marks this process remembers (the database holds them all). */
const REMEMBERED_MARKS = 10_000;

/**
 * When a credit cycle's marks may go: at its next refill, or (without refills) when the key expires,
 * so that retention never removes the mark of a cycle still running.
 */
function cycleEnd(row: ApiKeyRow, now: number): number {
  return (row.credits ? nextRefillAt(row.credits, now) : undefined) ?? row.expiresAt;
}

export type DerivedEvents = ReturnType<typeof createDerivedEvents>;

export function createDerivedEvents({
  store,
  outbox,
  clock,
  leadTimesMs,
  logger,
}: {
  store: Pick<WebhookStore, 'writeOnce' | 'keysEnteringWindow'>;
  outbox: Pick<Outbox, 'wants' | 'messages' | 'committed'>;
  clock: Clock;
  leadTimesMs: readonly number[];
  logger: Pick<Logger, 'warn'>;
}) {
  const remembered = new Map<string, number>();
  /** Writes of events in flight (the verifications that noticed them do not wait for them). */
  const inFlight = new Set<Promise<unknown>>();
  const track = (write: Promise<unknown>) => {
    inFlight.add(write);
    void write.finally(() => inFlight.delete(write));
  };
  const remember = (mark: string, at: number) => {
    if (remembered.size >= REMEMBERED_MARKS) remembered.delete(remembered.keys().next().value as string);
    remembered.set(mark, at);
  };
  const data = (row: ApiKeyRow, now: number, fields: Record<string, unknown>) => ({
    ...summaryOf(row, now, row.lastUsedAt ?? null),
    by: 'keygate',
    ...fields,
  });
  /** Writes the event once per mark (or once per `minGapMs`); never fails the caller. */
  const once = async (
    mark: string,
    at: number,
    minGapMs: number | undefined,
    type: Parameters<Outbox['messages']>[0],
    fields: () => Record<string, unknown>,
    /** How long the mark must be kept (retention counts from it): by default from `at`. */
    keepFrom = at,
  ) => {
    const last = remembered.get(mark);
    if (last !== undefined && (minGapMs === undefined || at - last < minGapMs)) return false;
    remember(mark, at);
    const messages = outbox.messages(type, fields(), at);
    if (messages.length === 0) return false;
    try {
      const written = await store.writeOnce(mark, minGapMs === undefined ? keepFrom : at, minGapMs, messages);
      if (written) outbox.committed();
      return written;
    } catch (error) {
      remembered.delete(mark);
      logger.warn('webhook event not written', { type, reason: String(error) });
      return false;
    }
  };

  return {
    /** Resolves once the events noticed so far are written (tests; a clean stop). */
    async settled(): Promise<void> {
      await Promise.all([...inFlight]);
    },

    /** key.expiring for every key that entered a lead window and has not had it; resolves with how many. */
    async scanExpiring(): Promise<number> {
      if (!outbox.wants('key.expiring')) return 0;
      let sent = 0;
      for (const lead of leadTimesMs) {
        const prefix = `expiring:${lead}:`;
        for (;;) {
          const now = clock();
          const rows = await store.keysEnteringWindow(now, lead, prefix, SCAN_BATCH);
          for (const row of rows) {
            // The mark lives until the key has expired, so a key is never told twice for one lead.
            const written = await store.writeOnce(
              `${prefix}${row.id}`,
              row.expiresAt,
              undefined,
              outbox.messages('key.expiring', data(row, now, { lead: leadText(lead) }), now),
            );
            if (written) sent++;
          }
          if (rows.length < SCAN_BATCH) break;
        }
      }
      if (sent > 0) outbox.committed();
      return sent;
    },

    /** A verification of `row` answered RATE_LIMITED. */
    rateLimited(row: ApiKeyRow, ratelimit: { limit: number; duration: number; scope: string }): void {
      if (!outbox.wants('key.rate_limited')) return;
      const now = clock();
      track(
        once(`rate_limited:${row.id}`, now, MINUTE, 'key.rate_limited', () => data(row, now, { ratelimit })),
      );
    },

    /** A verification of `row` answered USAGE_EXCEEDED for its own credits. */
    creditsExhausted(row: ApiKeyRow): void {
      if (row.credits == null || !outbox.wants('key.credits_exhausted')) return;
      const now = clock();
      const cycle = effectiveCredits(row.credits, now).refilledAt;
      track(
        once(
          `credits_exhausted:${lineageOf(row)}:${cycle}`,
          now,
          undefined,
          'key.credits_exhausted',
          () => data(row, now, { remaining: 0 }),
          cycleEnd(row, now),
        ),
      );
    },

    /**
     * A VALID verification of `row` left `remaining` of its own credits. The cycle began with what
     * was last set (the credits' anchor is still the set time) or with the refill amount.
     */
    creditsTaken(row: ApiKeyRow, remaining: number): void {
      const credits = row.credits;
      if (credits == null || !outbox.wants('key.credits_low')) return;
      const now = clock();
      const cycle = effectiveCredits(credits, now).refilledAt;
      const began = row.creditsSet?.at === cycle ? row.creditsSet.remaining : credits.refillAmount;
      if (began == null || remaining * 10 >= began) return;
      track(
        once(
          `credits_low:${lineageOf(row)}:${cycle}`,
          now,
          undefined,
          'key.credits_low',
          () => data(row, now, { remaining, threshold: Math.ceil(began / 10) }),
          cycleEnd(row, now),
        ),
      );
    },
  };
}
