// Values kept on an object itself, for as long as the object lives: what is made from a cached key
// row (its principal, parsed settings, this interval's usage entry) is kept on the row, not in a
// WeakMap keyed by it. A WeakMap holding every cached row is a table the collector walks in every
// collection, the young ones too: with 10k keys in rotation it doubled their pauses and raised the
// hot path's p99 by a third (bench/HISTORY.md). A plain property is just another reference.
//
// Every slot lives in one array behind one symbol, set once per object and not enumerable: spreads,
// Object.keys, JSON and structuredClone leave it out, so a copy of a row starts without any (a copy
// is another row, whose values must be made from it).

const SLOTS = Symbol('object slots');
let slotsMade = 0;

type Holder = { [SLOTS]?: unknown[] };

export type ObjectSlot<O extends object, T> = {
  /** The value kept on `object`, undefined when none was. */
  get(object: O): T | undefined;
  /** Keeps `value` on `object` (the object must not be frozen). */
  set(object: O, value: T): void;
};

/** A new slot: each one its own place on every object, whatever other slots it holds. */
export function objectSlot<O extends object, T>(): ObjectSlot<O, T> {
  const index = slotsMade++;
  return {
    get: (object) => (object as Holder)[SLOTS]?.[index] as T | undefined,
    set: (object, value) => {
      let slots = (object as Holder)[SLOTS];
      if (slots === undefined) {
        slots = [];
        Object.defineProperty(object, SLOTS, { value: slots });
      }
      slots[index] = value;
    },
  };
}
