// Bun's SQL client reports some trouble itself, as plain text through console.warn: its LISTEN
// connection's reconnect loop writes `bun:sql LISTEN "keygate_keys" failed, retrying: …` at each
// attempt (every 0.25 s to 32 s while the server is down). Every line keygate writes is JSON, so
// while a store listens those warnings become keygate's own warn lines instead, at most one per
// interval, each saying how many were held back since the last.
import type { Logger } from '../../core/log';

const CLIENT_PREFIX = 'bun:sql ';

type Sink = { report(text: string): void };
const sinks = new Set<Sink>();
let consoleWarn: typeof console.warn | undefined;

function warnRouted(...args: unknown[]): void {
  const [first] = args;
  if (typeof first === 'string' && first.startsWith(CLIENT_PREFIX)) {
    for (const sink of sinks) sink.report(first.slice(CLIENT_PREFIX.length));
    return;
  }
  consoleWarn?.apply(console, args);
}

export type ClientWarningOptions = {
  /** At most one line per this many milliseconds. */
  everyMs?: number;
  clock?: () => number;
};

/**
 * Sends the SQL client's console warnings to `logger` until the returned function is called. Any
 * other console.warn passes through untouched.
 */
export function routeClientWarnings(
  logger: Pick<Logger, 'warn'>,
  { everyMs = 10_000, clock = Date.now }: ClientWarningOptions = {},
): () => void {
  let loggedAt = Number.NEGATIVE_INFINITY;
  let heldBack = 0;
  const sink: Sink = {
    report(text) {
      const now = clock();
      if (now - loggedAt < everyMs) {
        heldBack++;
        return;
      }
      // The client's text names its channel and the connection error's message: no query, no parameters.
      logger.warn('database client warning', { detail: text, heldBack });
      loggedAt = now;
      heldBack = 0;
    },
  };
  if (sinks.size === 0) {
    consoleWarn = console.warn;
    console.warn = warnRouted;
  }
  sinks.add(sink);
  return () => {
    if (!sinks.delete(sink) || sinks.size > 0) return;
    // Put back only our own replacement: whoever replaced it since keeps theirs.
    if (console.warn === warnRouted && consoleWarn !== undefined) console.warn = consoleWarn;
    consoleWarn = undefined;
  };
}
