// The usage flusher: one flush per interval for all keys, driven by its timer, written in slices of
// at most sliceKeys keys with the event loop free between two; a failed slice keeps its counts and
// those after it for the next flush; a read of the history never overlaps a slice's write; stop
// writes what is left.
import { describe, expect, it } from 'bun:test';
import { createUsageCounter, type UsageBatch } from '../../src/usage/counter';
import { createUsageFlusher, type FlushTimer, USAGE_SLICE_KEYS } from '../../src/usage/flusher';

const T0 = Date.parse('2026-11-22T10:15:00.000Z');

/** A promise and the functions that settle it. */
function deferred<T = void>() {
  let resolve: (value: T) => void = () => {};
  let reject: (reason: unknown) => void = () => {};
  const promise = new Promise<T>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
}

function setup({
  failWrites = 0,
  failWrite = -1,
  sliceKeys,
  pause,
}: {
  failWrites?: number;
  failWrite?: number;
  sliceKeys?: number;
  pause?: () => Promise<void>;
} = {}) {
  const counter = createUsageCounter({ clock: () => T0, maxKeys: 200_000 });
  const writes: UsageBatch[] = [];
  let failures = failWrites;
  /** When set, the next write waits for it. */
  let gate: Promise<void> | undefined;
  const store = {
    async writeUsage(batch: UsageBatch) {
      writes.push(batch);
      if (gate) await gate;
      if (failures > 0 || writes.length - 1 === failWrite) {
        failures--;
        throw Object.assign(new Error('down'), { code: 'ECONNREFUSED' });
      }
    },
  };
  const warnings: Array<[string, unknown]> = [];
  const timer = { ticks: [] as Array<() => void>, ms: 0, cancelled: false };
  const fakeTimer: FlushTimer = (tick, ms) => {
    timer.ticks.push(tick);
    timer.ms = ms;
    return () => {
      timer.cancelled = true;
    };
  };
  const flusher = createUsageFlusher({
    counter,
    store,
    intervalSeconds: 7,
    timer: fakeTimer,
    logger: { warn: (msg: string, fields?: unknown) => warnings.push([msg, fields]) },
    ...(sliceKeys === undefined ? {} : { sliceKeys }),
    ...(pause === undefined ? {} : { pause }),
  });
  return {
    counter,
    writes,
    warnings,
    timer,
    flusher,
    holdWrites() {
      const held = deferred();
      gate = held.promise;
      return () => {
        gate = undefined;
        held.resolve();
      };
    },
  };
}

const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('usage flusher', () => {
  it('flushes every USAGE_FLUSH_SECONDS when its timer ticks: one write carrying every key', async () => {
    const { counter, writes, timer, flusher } = setup();
    expect(timer.ms).toBe(7000);
    timer.ticks[0]?.();
    await flusher.flush();
    expect(writes).toHaveLength(0); // an idle interval writes nothing
    for (let i = 0; i < 50; i++) counter.record(`key${i}`, 'valid');
    timer.ticks[0]?.();
    await flusher.flush();
    expect(writes).toHaveLength(1);
    expect(writes[0]?.rows).toHaveLength(50);
    expect(writes[0]?.lastUsed).toHaveLength(50);
  });

  it('a failed write keeps its counts for the next flush, and says so once in the log', async () => {
    const { counter, writes, warnings, flusher } = setup({ failWrites: 1 });
    counter.record('a', 'valid');
    await flusher.flush();
    expect(warnings.map(([msg]) => msg)).toEqual(['usage flush failed; its counts go with the next one']);
    expect(warnings[0]?.[1]).toEqual({ code: 'ECONNREFUSED' });
    counter.record('a', 'valid');
    await flusher.flush();
    expect(writes.map((batch) => batch.rows[0]?.valid)).toEqual([1, 2]);
  });

  it('a flush asked for while one writes runs after it, and the asks between join it', async () => {
    const { counter, writes, flusher, holdWrites } = setup();
    counter.record('a', 'valid');
    const release = holdWrites();
    const first = flusher.flush();
    await settled();
    counter.record('b', 'valid');
    const second = flusher.flush();
    const third = flusher.flush();
    expect(third).toBe(second);
    release();
    await Promise.all([first, second]);
    expect(writes.map((batch) => batch.rows.map((row) => row.keyId))).toEqual([['a'], ['b']]);
  });

  it('a flush waits for reads under way, and a read waits for a flush under way', async () => {
    const { counter, writes, flusher, holdWrites } = setup();
    counter.record('a', 'valid');
    const readInDatabase = deferred();
    const reading = flusher.read(async () => {
      await readInDatabase.promise;
      return counter.pendingRows('a').length;
    });
    const flushing = flusher.flush();
    await settled();
    expect(writes).toHaveLength(0); // the read is under way: nothing taken yet
    readInDatabase.resolve();
    expect(await reading).toBe(1);
    await flushing;
    expect(writes).toHaveLength(1);

    counter.record('a', 'denied');
    const release = holdWrites();
    const second = flusher.flush();
    await settled();
    let readRan = false;
    const waiting = flusher.read(async () => {
      readRan = true;
    });
    await settled();
    expect(readRan).toBe(false);
    release();
    await Promise.all([second, waiting]);
    expect(readRan).toBe(true);
  });

  it('stop cancels the timer and writes what is left', async () => {
    const { counter, writes, timer, flusher } = setup();
    counter.record('a', 'denied');
    await flusher.stop();
    expect(timer.cancelled).toBe(true);
    expect(writes).toHaveLength(1);
    expect(writes[0]?.rows[0]?.denied).toBe(1);
  });

  it('writes a flush of 100k keys in slices of at most USAGE_SLICE_KEYS keys, the event loop free between two', async () => {
    const turns: number[] = [];
    const { counter, writes, flusher } = setup({
      // The default pause is the next turn of the event loop; this one also says when it came.
      pause: () =>
        new Promise((resolve) => {
          turns.push(writes.length);
          setImmediate(resolve);
        }),
    });
    for (let i = 0; i < 100_000; i++) counter.record(`key${i}`, 'valid');
    await flusher.flush();
    expect(writes).toHaveLength(Math.ceil(100_000 / USAGE_SLICE_KEYS));
    expect(Math.max(...writes.map((batch) => new Set(batch.rows.map((row) => row.keyId)).size))).toBe(
      USAGE_SLICE_KEYS,
    );
    expect(new Set(writes.flatMap((batch) => batch.rows.map((row) => row.keyId))).size).toBe(100_000);
    // One pause after every slice but the last.
    expect(turns).toEqual(Array.from({ length: writes.length - 1 }, (_, i) => i + 1));
    expect(counter.size).toBe(0);
  });

  it('a slice that fails puts back its counts and those after it; the slices before it stay written', async () => {
    const { counter, writes, warnings, flusher } = setup({ sliceKeys: 2, failWrite: 1 });
    for (const key of ['a', 'b', 'c', 'd', 'e']) counter.record(key, 'valid');
    await flusher.flush();
    expect(writes.map((batch) => batch.rows.map((row) => row.keyId))).toEqual([
      ['a', 'b'],
      ['c', 'd'],
    ]);
    expect(warnings.map(([msg]) => msg)).toEqual(['usage flush failed; its counts go with the next one']);
    // a and b were committed: only c, d and e go with the next flush, each counted once.
    expect(counter.pendingRows('a')).toEqual([]);
    expect(counter.pendingRows('c').map((row) => row.valid)).toEqual([1]);
    await flusher.flush();
    expect(writes.slice(2).map((batch) => batch.rows.map((row) => [row.keyId, row.valid]))).toEqual([
      [
        ['c', 1],
        ['d', 1],
      ],
      [['e', 1]],
    ]);
  });

  it('lets a read run between two slices, and the read sees each count once', async () => {
    const between = deferred();
    const resume = deferred();
    let paused = false;
    const { counter, writes, flusher } = setup({
      sliceKeys: 1,
      pause: () => {
        if (paused) return Promise.resolve();
        paused = true;
        between.resolve();
        return resume.promise;
      },
    });
    counter.record('a', 'valid');
    counter.record('b', 'valid');
    const flushing = flusher.flush();
    await between.promise;
    expect(writes).toHaveLength(1);
    // a is in the database now, b still in memory: a read between the slices runs at once.
    const read = await flusher.read(async () => [
      counter.pendingRows('a').length,
      counter.pendingRows('b').length,
    ]);
    expect(read).toEqual([0, 1]);
    resume.resolve();
    await flushing;
    expect(writes).toHaveLength(2);
  });

  it('logs the attempts dropped past the bound on keys', async () => {
    const counter = createUsageCounter({ clock: () => T0, maxKeys: 1 });
    const warnings: string[] = [];
    const flusher = createUsageFlusher({
      counter,
      store: { writeUsage: async () => {} },
      intervalSeconds: 1,
      timer: () => () => {},
      logger: { warn: (msg) => warnings.push(msg) },
    });
    counter.record('a', 'valid');
    counter.record('b', 'valid');
    await flusher.flush();
    expect(warnings).toEqual(['usage counts dropped: too many keys in one interval']);
  });
});
