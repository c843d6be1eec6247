// How the screens word keys and times.
import type { Key } from './api';

/** `kg_abcd…wxyz`: enough to tell keys apart, never the whole id on a shared screen. */
export function maskKey(key: string): string {
  return key.length <= 11 ? key : `${key.slice(0, 7)}…${key.slice(-4)}`;
}

const DAY = 86_400_000;
/** A key within this long of its expiry is "expiring soon". */
const SOON = 7 * DAY;

export type Status = 'active' | 'disabled' | 'retiring' | 'expiring soon';

export function statusOf(key: Key, now = Date.now()): Status {
  if (!key.enabled) return 'disabled';
  if (key.retiring) return 'retiring';
  if (Date.parse(key.expiresAt) - now < SOON) return 'expiring soon';
  return 'active';
}

/** A day, in the reader's locale (the exact moment is in the cell's title). */
export function day(iso: string): string {
  return new Date(iso).toLocaleDateString(undefined, { year: 'numeric', month: 'short', day: 'numeric' });
}

export function when(iso: string | null): string {
  if (iso === null) return 'never';
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/** To the second: a delivery's attempts may be seconds apart. */
export function toTheSecond(iso: string): string {
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

export function seconds(total: number): string {
  const units: Array<[number, string]> = [
    [31_536_000, 'year'],
    [86_400, 'day'],
    [3600, 'hour'],
    [60, 'minute'],
  ];
  for (const [size, name] of units) {
    if (total >= size && total % size === 0) {
      const count = total / size;
      return `${count} ${name}${count === 1 ? '' : 's'}`;
    }
  }
  return `${total} seconds`;
}
