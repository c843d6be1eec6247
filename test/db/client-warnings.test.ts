// The SQL client's own console warnings become keygate's JSON warn lines, one per interval with the
// count held back, and every other console.warn is left alone; the console is restored afterwards.
import { afterEach, beforeEach, expect, it } from 'bun:test';
import { createLogger } from '../../src/core/log';
import { routeClientWarnings } from '../../src/db/postgres/client-warnings';

const LISTEN_FAILED = 'bun:sql LISTEN "keygate_keys" failed, retrying: Failed to connect';

let passedThrough: unknown[][] = [];
let before: typeof console.warn;
beforeEach(() => {
  before = console.warn;
  passedThrough = [];
  console.warn = (...args: unknown[]) => {
    passedThrough.push(args);
  };
});
afterEach(() => {
  console.warn = before;
});

function loggerKeepingLines() {
  const written: string[] = [];
  const logger = createLogger('info', (chunk) => written.push(chunk));
  return {
    logger,
    lines: () => {
      logger.flush();
      return written
        .join('')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line));
    },
  };
}

it('logs the first warning at once, then one per interval with how many were held back', () => {
  const { logger, lines } = loggerKeepingLines();
  const time = { now: 0 };
  const stop = routeClientWarnings(logger, { everyMs: 10_000, clock: () => time.now });
  try {
    console.warn(LISTEN_FAILED);
    time.now = 2_000;
    console.warn(LISTEN_FAILED);
    time.now = 9_999;
    console.warn(LISTEN_FAILED);
    time.now = 10_000;
    console.warn(LISTEN_FAILED);
    const detail = 'LISTEN "keygate_keys" failed, retrying: Failed to connect';
    expect(lines().map(({ level, msg, detail, heldBack }) => ({ level, msg, detail, heldBack }))).toEqual([
      { level: 'warn', msg: 'database client warning', detail, heldBack: 0 },
      { level: 'warn', msg: 'database client warning', detail, heldBack: 2 },
    ]);
    expect(passedThrough).toEqual([]);
  } finally {
    stop();
  }
});

it('passes any other warning through, and restores console.warn when the last route stops', () => {
  const { logger, lines } = loggerKeepingLines();
  const mine = console.warn;
  const stopFirst = routeClientWarnings(logger);
  const stopSecond = routeClientWarnings(logger);
  console.warn('something else', 42);
  expect(passedThrough).toEqual([['something else', 42]]);
  console.warn(LISTEN_FAILED);
  expect(lines()).toHaveLength(2); // one line from each route
  stopFirst();
  expect(console.warn).not.toBe(mine);
  stopSecond();
  stopSecond(); // a second call changes nothing
  expect(console.warn).toBe(mine);
});
