// isoFormatter: the same text as toISOString for every time asked, repeated, new or earlier.
import { describe, expect, it } from 'bun:test';
import { isoFormatter } from '../../src/core/clock';

describe('isoFormatter', () => {
  it('formats each time as toISOString does, whatever came before', () => {
    const iso = isoFormatter();
    const times = [0, 0, 1_800_000_000_123, 1_800_000_000_123, 1_800_000_000_124, 5, 1_800_000_000_123, -1];
    for (const ms of times) expect(iso(ms)).toBe(new Date(ms).toISOString());
  });

  it('throws for a time no Date can hold, as toISOString does', () => {
    expect(() => isoFormatter()(Number.NaN)).toThrow(RangeError);
  });
});
