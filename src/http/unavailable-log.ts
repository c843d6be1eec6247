// The warn lines of 503s for an unavailable database: during an outage every request fails, and a
// line each drowned the log (17,933 lines over three 2.5 s outages on three replicas). The first 503
// after a quiet interval writes "database unavailable" at once; those that follow within the
// interval are only counted, and one "database still unavailable" line per interval says how many
// there were, written when the interval ends.
import type { Clock } from '../core/clock';
import type { Logger } from '../core/log';

export const UNAVAILABLE_LOG_INTERVAL_MS = 10_000;

/** Calls `run` once, `ms` from now (a timer that does not keep the process alive); tests inject one. */
export type Schedule = (run: () => void, ms: number) => void;

const unrefTimeout: Schedule = (run, ms) => {
  setTimeout(run, ms).unref();
};

export function createUnavailableLog(
  logger: Pick<Logger, 'warn'>,
  clock: Clock,
  {
    intervalMs = UNAVAILABLE_LOG_INTERVAL_MS,
    schedule = unrefTimeout,
  }: { intervalMs?: number; schedule?: Schedule } = {},
) {
  /** When the last line was written; the 503s counted since belong to its interval. */
  let lastLineAt = Number.NEGATIVE_INFINITY;
  let counted = 0;
  let lastCode: string | undefined;
  /** The summary scheduled, if any: a summary written before it comes makes it stale. */
  let scheduled = 0;
  let summaries = 0;

  const writeSummary = () => {
    summaries++;
    if (counted === 0) return;
    logger.warn('database still unavailable', {
      count: counted,
      code: lastCode,
      seconds: Math.round((clock() - lastLineAt) / 1000),
    });
    counted = 0;
    lastLineAt = clock();
  };

  return {
    /** A request answered 503 because the database could not answer. */
    record(requestId: string | undefined, code: string | undefined): void {
      const now = clock();
      if (counted === 0 && now - lastLineAt >= intervalMs) {
        logger.warn('database unavailable', { requestId, code });
        lastLineAt = now;
        return;
      }
      counted++;
      lastCode = code;
      if (now - lastLineAt >= intervalMs) {
        writeSummary();
      } else if (scheduled !== summaries + 1) {
        // One summary at the end of the interval, for the 503s after the last line (the outage
        // may end before another comes).
        scheduled = summaries + 1;
        const due = scheduled;
        schedule(
          () => {
            if (summaries + 1 === due) writeSummary();
          },
          lastLineAt + intervalMs - now,
        );
      }
    },
  };
}
