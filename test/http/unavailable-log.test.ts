// The log during a database outage: the first 503 writes "database unavailable", the others are
// counted, and one "database still unavailable" line per interval says how many came; after a quiet
// interval the next outage starts with a first line again. On an injected clock and timer, and through
// a keygate whose store does not answer.
import { describe, expect, it } from 'bun:test';
import { StoreUnavailableError } from '../../src/apikeys/store';
import { createUnavailableLog } from '../../src/http/unavailable-log';
import { testKeygate } from '../support/keygate';

function setup() {
  const time = { now: 1_000_000 };
  const lines: Array<[string, Record<string, unknown> | undefined]> = [];
  const timers: Array<{ at: number; run: () => void }> = [];
  const log = createUnavailableLog({ warn: (msg, fields) => lines.push([msg, fields]) }, () => time.now, {
    intervalMs: 10_000,
    schedule: (run, ms) => timers.push({ at: time.now + ms, run }),
  });
  /** Moves the clock on by `ms`, running each timer due by then at its time. */
  const advance = (ms: number) => {
    const until = time.now + ms;
    for (;;) {
      timers.sort((a, b) => a.at - b.at);
      const timer = timers[0];
      if (timer === undefined || timer.at > until) break;
      timers.shift();
      time.now = timer.at;
      timer.run();
    }
    time.now = until;
  };
  return { log, lines, advance };
}

describe('the log of an unavailable database', () => {
  it('writes the first 503, then one line per interval with the count of those since', () => {
    const { log, lines, advance } = setup();
    // A 25 s outage, 100 503s a second.
    for (let ms = 0; ms < 25_000; ms += 10) {
      log.record(`r${ms}`, 'ECONNREFUSED');
      advance(10);
    }
    advance(10_000);
    expect(lines).toEqual([
      ['database unavailable', { requestId: 'r0', code: 'ECONNREFUSED' }],
      ['database still unavailable', { count: 999, code: 'ECONNREFUSED', seconds: 10 }],
      ['database still unavailable', { count: 1000, code: 'ECONNREFUSED', seconds: 10 }],
      // The last 5 s of the outage: written when their interval ended, though no 503 came then.
      ['database still unavailable', { count: 500, code: 'ECONNREFUSED', seconds: 10 }],
    ]);
    // A new outage an interval after the last line starts with a first line again.
    advance(10_000);
    log.record('again', '57P01');
    expect(lines.at(-1)).toEqual(['database unavailable', { requestId: 'again', code: '57P01' }]);
  });

  it('writes nothing more for a single 503', () => {
    const { log, lines, advance } = setup();
    log.record('only', 'ECONNREFUSED');
    advance(60_000);
    expect(lines).toHaveLength(1);
  });
});

it('a keygate whose store does not answer writes one line for 50 requests answered 503, not 50', async () => {
  const kg = await testKeygate({ KEY_CACHE_SECONDS: '0' });
  try {
    kg.keygate.store.findKey = () => {
      throw new StoreUnavailableError('SQLITE_BUSY');
    };
    const answers = await Promise.all(
      Array.from({ length: 50 }, () =>
        kg.req('POST', '/apikeys/verify', { body: { key: `kg_${'a'.repeat(30)}`, secret: 'x'.repeat(43) } }),
      ),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(50).fill(503));
    expect(kg.logLines('database unavailable')).toHaveLength(1);
    // The next 503 after the interval writes the count of the 49 held back, and itself.
    kg.time.now += 10_000;
    await kg.req('POST', '/apikeys/verify', {
      body: { key: `kg_${'a'.repeat(30)}`, secret: 'x'.repeat(43) },
    });
    expect(kg.logLines('database still unavailable')).toEqual([
      expect.objectContaining({ count: 50, code: 'SQLITE_BUSY' }),
    ]);
  } finally {
    await kg.keygate.close();
  }
});
