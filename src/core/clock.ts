// The time source, passed in everywhere so tests can fix or move it.
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();

/**
 * `new Date(ms).toISOString()`, remembering the last one: under load the calls in a row mostly ask for
 * the same millisecond (a log line's time, a rate limit's reset), and formatting one costs more than
 * the rest of a line. Each use keeps its own, so two uses asking different times do not take turns.
 */
export function isoFormatter(): (ms: number) => string {
  let formattedAt = Number.NaN;
  let formatted = '';
  return (ms) => {
    if (ms !== formattedAt) {
      formatted = new Date(ms).toISOString();
      formattedAt = ms;
    }
    return formatted;
  };
}
