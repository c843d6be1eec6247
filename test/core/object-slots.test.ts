// objectSlot: values kept on an object itself, each slot its own, invisible to copies and JSON.
import { describe, expect, it } from 'bun:test';
import { objectSlot } from '../../src/core/object-slots';

describe('objectSlot', () => {
  it('keeps a value per object and per slot', () => {
    const name = objectSlot<object, string>();
    const size = objectSlot<object, number>();
    const a = { id: 'a' };
    const b = { id: 'b' };
    expect(name.get(a)).toBeUndefined();
    name.set(a, 'first');
    size.set(b, 2);
    name.set(b, 'second');
    expect(name.get(a)).toBe('first');
    expect(size.get(a)).toBeUndefined();
    expect([name.get(b), size.get(b)]).toEqual(['second', 2]);
    name.set(a, 'again');
    expect(name.get(a)).toBe('again');
  });

  it('is left out of keys, spreads, JSON and clones: a copy holds none', () => {
    const slot = objectSlot<object, string>();
    const row = { id: 'a', level: 3 };
    slot.set(row, 'made from row');
    expect(Object.keys(row)).toEqual(['id', 'level']);
    expect(JSON.stringify(row)).toBe('{"id":"a","level":3}');
    expect(slot.get({ ...row })).toBeUndefined();
    expect(slot.get(Object.assign({}, row))).toBeUndefined();
    expect(slot.get(structuredClone(row))).toBeUndefined();
    expect(slot.get(row)).toBe('made from row');
  });
});
