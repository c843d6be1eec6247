// Reading and writing addresses: every IPv4 and IPv6 textual form is read, IPv4-mapped addresses are
// their IPv4 address, anything a lenient parser would guess at is refused, and each address has
// one canonical text.
import { describe, expect, it } from 'bun:test';
import fc from 'fast-check';
import { formatAddress, parseAddress } from '../../src/network/address';

describe('parseAddress reads', () => {
  it.each([
    ['0.0.0.0', 4, '0.0.0.0'],
    ['255.255.255.255', 4, '255.255.255.255'],
    ['203.0.113.7', 4, '203.0.113.7'],
    ['10.0.0.1', 4, '10.0.0.1'],
    ['::', 6, '::'],
    ['::1', 6, '::1'],
    ['1::', 6, '1::'],
    ['2001:db8::1', 6, '2001:db8::1'],
    ['2001:DB8::1', 6, '2001:db8::1'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', 6, '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', 6, '2001:db8::1:0:0:1'],
    ['2001:db8::1:0:0:1', 6, '2001:db8::1:0:0:1'],
    ['1:0:0:2:0:0:0:3', 6, '1:0:0:2::3'],
    ['2001:db8:0:1:1:1:1:1', 6, '2001:db8:0:1:1:1:1:1'],
    ['1:2:3:4:5:6:7::', 6, '1:2:3:4:5:6:7:0'],
    ['::2:3:4:5:6:7:8', 6, '0:2:3:4:5:6:7:8'],
    ['FFFF:ffff:FfFf:ffff:ffff:ffff:ffff:ffff', 6, 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
    ['fe80::1', 6, 'fe80::1'],
    ['64:ff9b::1.2.3.4', 6, '64:ff9b::102:304'],
    ['::1.2.3.4', 6, '::102:304'],
    ['1:2:3:4:5:6:1.2.3.4', 6, '1:2:3:4:5:6:102:304'],
    ['::ffff:0:1.2.3.4', 6, '::ffff:0:102:304'],
    // IPv4-mapped: the IPv4 address itself, however it is written.
    ['::ffff:1.2.3.4', 4, '1.2.3.4'],
    ['::FFFF:1.2.3.4', 4, '1.2.3.4'],
    ['::ffff:0102:0304', 4, '1.2.3.4'],
    ['0:0:0:0:0:ffff:102:304', 4, '1.2.3.4'],
    ['::ffff:127.0.0.1', 4, '127.0.0.1'],
    ['::ffff:0.0.0.0', 4, '0.0.0.0'],
  ])('%p as IPv%p %p', (text, version, canonical) => {
    const address = parseAddress(text);
    expect(address?.version).toBe(version as 4 | 6);
    expect(address && formatAddress(address)).toBe(canonical);
  });
});

describe('parseAddress refuses', () => {
  it.each([
    '',
    '1.2.3',
    '1.2.3.4.5',
    '256.0.0.1',
    '1.2.3.-1',
    '01.2.3.4',
    '1.2.3.04',
    '00.0.0.0',
    '0x1.2.3.4',
    '1.2.3.4 ',
    ' 1.2.3.4',
    '1.2.3.4\n',
    '1.2.3.4:80',
    '1.2.3.4/32',
    '1..3.4',
    '１.2.3.4',
    ':',
    ':::',
    '1:::2',
    '1::2::3',
    ':1::',
    '::1:',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7:8::',
    '::1:2:3:4:5:6:7:8',
    '12345::',
    'g::1',
    'fe80::1%eth0',
    'fe80::1%1',
    '[::1]',
    '[::1]:80',
    '::1 ',
    '1.2.3.4::',
    '::1.2.3.4:5',
    '::ffff:1.2.3.04',
    '::ffff:1.2.3',
    '1:2:3:4:5:6:7:1.2.3.4',
    'localhost',
    '0000000000000000000000000000000000000000000001.2.3.4',
  ])('%p', (text) => {
    expect(parseAddress(text)).toBeUndefined();
  });
});

describe('formatAddress', () => {
  it('writes RFC 5952: the longest run of zero groups, the first of equal runs, never one group alone', () => {
    const canonical = (text: string) => formatAddress(parseAddress(text) ?? { version: 6, value: -1n });
    expect(canonical('1:0:0:1:0:0:1:1')).toBe('1::1:0:0:1:1');
    expect(canonical('1:0:1:1:1:1:1:1')).toBe('1:0:1:1:1:1:1:1');
    expect(canonical('0:0:0:0:0:0:0:0')).toBe('::');
    expect(canonical('0:0:0:0:0:0:0:1')).toBe('::1');
  });

  it('reads back every address it writes (fast-check)', () => {
    const anyAddress = fc.oneof(
      fc.bigInt({ min: 0n, max: (1n << 32n) - 1n }).map((value) => ({ version: 4 as const, value })),
      fc
        .bigInt({ min: 0n, max: (1n << 128n) - 1n })
        .filter((value) => value >> 32n !== 0xffffn)
        .map((value) => ({ version: 6 as const, value })),
      // Zero runs are where the canonical form has choices to make.
      fc
        .array(fc.constantFrom(0, 0, 0, 1, 0xffff), { minLength: 8, maxLength: 8 })
        .map((groups) => groups.reduce((value, group) => (value << 16n) | BigInt(group), 0n))
        .filter((value) => value >> 32n !== 0xffffn)
        .map((value) => ({ version: 6 as const, value })),
    );
    fc.assert(
      fc.property(anyAddress, (address) => {
        expect(parseAddress(formatAddress(address))).toEqual(address);
      }),
      { seed: 20261128, numRuns: 500 },
    );
  });
});
