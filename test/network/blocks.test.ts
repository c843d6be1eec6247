// CIDR blocks and lists: which addresses a block holds (IPv4, IPv6, IPv4-mapped, the edges /0, /32,
// /128), which block lies within another, a key's allowedIps and the TRUSTED_PROXIES setting.
import { describe, expect, it } from 'bun:test';
import { type Address, parseAddress } from '../../src/network/address';
import {
  addressList,
  allowedIpsProblem,
  blockContains,
  blockWithin,
  firstOutside,
  parseBlock,
  parseTrustedProxies,
  trustedProxiesProblem,
} from '../../src/network/blocks';

function address(text: string): Address {
  const parsed = parseAddress(text);
  if (parsed === undefined) throw new Error(`test address ${text} does not parse`);
  return parsed;
}

describe('blockContains', () => {
  it.each([
    // IPv4
    ['203.0.113.0/24', '203.0.113.0', true],
    ['203.0.113.0/24', '203.0.113.255', true],
    ['203.0.113.0/24', '203.0.112.255', false],
    ['203.0.113.0/24', '203.0.114.0', false],
    ['10.0.0.0/8', '10.255.255.255', true],
    ['10.0.0.0/8', '11.0.0.0', false],
    ['0.0.0.0/0', '0.0.0.0', true],
    ['0.0.0.0/0', '255.255.255.255', true],
    ['0.0.0.0/0', '::1', false],
    ['203.0.113.7/32', '203.0.113.7', true],
    ['203.0.113.7/32', '203.0.113.8', false],
    ['203.0.113.7', '203.0.113.7', true],
    ['203.0.113.7', '203.0.113.6', false],
    ['128.0.0.0/1', '127.255.255.255', false],
    ['128.0.0.0/1', '128.0.0.0', true],
    // Bits after the prefix are cleared: 10.1.2.3/8 is 10.0.0.0/8.
    ['10.1.2.3/8', '10.200.0.1', true],
    ['10.1.2.3/8', '11.1.2.3', false],
    // IPv6
    ['2001:db8::/32', '2001:db8::', true],
    ['2001:db8::/32', '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', true],
    ['2001:db8::/32', '2001:db9::', false],
    ['2001:db8::/32', '2001:db7:ffff:ffff:ffff:ffff:ffff:ffff', false],
    ['::/0', '::', true],
    ['::/0', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true],
    ['::/0', '10.0.0.1', false],
    ['::/0', '::ffff:10.0.0.1', false],
    ['2001:db8::1/128', '2001:db8::1', true],
    ['2001:db8::1/128', '2001:db8::2', false],
    ['2001:db8::1', '2001:db8::1', true],
    ['2001:DB8::1', '2001:db8:0:0:0:0:0:1', true],
    ['2001:db8::/127', '2001:db8::1', true],
    ['2001:db8::/127', '2001:db8::2', false],
    ['8000::/1', '7fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', false],
    ['8000::/1', '8000::', true],
    ['::1', '0.0.0.1', false],
    ['::1.2.3.4', '1.2.3.4', false],
    // IPv4-mapped addresses are IPv4 addresses, against IPv4 and mapped blocks alike.
    ['203.0.113.0/24', '::ffff:203.0.113.7', true],
    ['203.0.113.0/24', '::ffff:cb00:7107', true],
    ['203.0.113.0/24', '::ffff:203.0.114.7', false],
    ['127.0.0.1', '::ffff:127.0.0.1', true],
    ['::ffff:10.0.0.0/104', '10.9.8.7', true],
    ['::ffff:10.0.0.0/104', '::ffff:10.9.8.7', true],
    ['::ffff:10.0.0.0/104', '11.0.0.0', false],
    ['::ffff:0:0/96', '1.2.3.4', true],
    ['::ffff:0:0/96', '::1', false],
    ['::ffff:1.2.3.4/128', '1.2.3.4', true],
    ['::ffff:1.2.3.4', '1.2.3.4', true],
    ['::ffff:1.2.3.4', '1.2.3.5', false],
  ])('%p holds %p: %p', (block, text, expected) => {
    const parsed = parseBlock(block);
    expect(parsed).toBeDefined();
    if (parsed) expect(blockContains(parsed, address(text))).toBe(expected);
  });
});

describe('parseBlock', () => {
  it.each([
    ['10.0.0.0/8', { version: 4, network: 0x0a000000n, prefix: 8 }],
    ['10.1.2.3/8', { version: 4, network: 0x0a000000n, prefix: 8 }],
    ['1.2.3.4', { version: 4, network: 0x01020304n, prefix: 32 }],
    ['0.0.0.0/0', { version: 4, network: 0n, prefix: 0 }],
    ['::ffff:10.0.0.0/104', { version: 4, network: 0x0a000000n, prefix: 8 }],
    ['::ffff:0:0/96', { version: 4, network: 0n, prefix: 0 }],
    ['::ffff:1.2.3.4', { version: 4, network: 0x01020304n, prefix: 32 }],
    ['::/0', { version: 6, network: 0n, prefix: 0 }],
    ['2001:db8::/32', { version: 6, network: 0x20010db8n << 96n, prefix: 32 }],
  ])('%p is %p', (text, block) => {
    expect(parseBlock(text)).toEqual(block as never);
  });

  it.each([
    '',
    '/8',
    '10.0.0.0/',
    '10.0.0.0/33',
    '10.0.0.0/-1',
    '10.0.0.0/+8',
    '10.0.0.0/08',
    '10.0.0.0/8/8',
    '10.0.0.0/ 8',
    '10.0.0.0 /8',
    '10.0.0.0/8 ',
    '10.0.0/8',
    '2001:db8::/129',
    '2001:db8::/1000',
    '[2001:db8::]/32',
    'fe80::%eth0/64',
    // Wider than the mapped range: it would hold IPv4 and IPv6 addresses at once.
    '::ffff:0:0/95',
    '::ffff:10.0.0.0/8',
    'example.com/24',
  ])('refuses %p', (text) => {
    expect(parseBlock(text)).toBeUndefined();
  });
});

describe('blockWithin', () => {
  it.each([
    ['10.1.0.0/16', '10.0.0.0/8', true],
    ['10.0.0.0/8', '10.0.0.0/8', true],
    ['10.1.2.3', '10.0.0.0/8', true],
    ['10.0.0.0/8', '10.1.0.0/16', false],
    ['11.0.0.0/16', '10.0.0.0/8', false],
    ['10.0.0.0/7', '10.0.0.0/8', false],
    ['1.2.3.4', '0.0.0.0/0', true],
    ['0.0.0.0/0', '0.0.0.0/0', true],
    ['1.2.3.4', '1.2.3.4', true],
    ['1.2.3.4', '1.2.3.5', false],
    ['2001:db8:1::/48', '2001:db8::/32', true],
    ['2001:db8::/32', '2001:db8:1::/48', false],
    ['2001:db8::1', '::/0', true],
    ['1.2.3.4', '::/0', false],
    ['::/0', '0.0.0.0/0', false],
    ['::ffff:10.1.0.0/112', '10.0.0.0/8', true],
    ['10.1.0.0/16', '::ffff:10.0.0.0/104', true],
  ])('%p within %p: %p', (inner, outer, expected) => {
    const innerBlock = parseBlock(inner);
    const outerBlock = parseBlock(outer);
    if (!innerBlock || !outerBlock) throw new Error('test blocks must parse');
    expect(blockWithin(innerBlock, outerBlock)).toBe(expected);
  });
});

describe('addressList', () => {
  it('holds an address inside any of its entries, and never an unknown one', () => {
    const list = addressList(['203.0.113.0/24', '2001:db8::/32', '198.51.100.7']);
    expect(list.contains(address('203.0.113.9'))).toBe(true);
    expect(list.contains(address('::ffff:203.0.113.9'))).toBe(true);
    expect(list.contains(address('2001:db8::42'))).toBe(true);
    expect(list.contains(address('198.51.100.7'))).toBe(true);
    expect(list.contains(address('198.51.100.8'))).toBe(false);
    expect(list.contains(address('2001:db9::'))).toBe(false);
    expect(list.contains(undefined)).toBe(false);
    expect(addressList(['0.0.0.0/0', '::/0']).contains(undefined)).toBe(false);
  });

  it('an empty list holds nothing', () => {
    expect(addressList([]).contains(address('127.0.0.1'))).toBe(false);
  });

  it('throws on an entry that was not validated, rather than dropping it', () => {
    expect(() => addressList(['10.0.0.0/8', 'nonsense'])).toThrow(
      '"nonsense" is not an address or CIDR block.',
    );
  });
});

describe('allowedIpsProblem', () => {
  const entries = (count: number) => Array.from({ length: count }, (_, index) => `10.0.${index}.0/24`);

  it.each([
    [['203.0.113.7'], undefined],
    [['203.0.113.0/24', '2001:db8::/32', '::ffff:203.0.113.7'], undefined],
    [entries(50), undefined],
    // Duplicates are allowed: they change nothing.
    [['10.0.0.1', '10.0.0.1'], undefined],
    [[], 'allowedIps must hold 1 to 50 entries (it holds 0).'],
    [entries(51), 'allowedIps must hold 1 to 50 entries (it holds 51).'],
    ['10.0.0.1', 'allowedIps must be an array of 1 to 50 IPv4 or IPv6 addresses or CIDR blocks.'],
    [null, 'allowedIps must be an array of 1 to 50 IPv4 or IPv6 addresses or CIDR blocks.'],
    [{ 0: '10.0.0.1' }, 'allowedIps must be an array of 1 to 50 IPv4 or IPv6 addresses or CIDR blocks.'],
    [['10.0.0.1', 7], 'allowedIps[1] must be a string.'],
    [
      ['10.0.0.1', '10.0.0.2', '10.0.0.0/33', 'x'],
      'allowedIps[2] "10.0.0.0/33" is not an IPv4 or IPv6 address or CIDR block.',
    ],
    [['fe80::1%eth0'], 'allowedIps[0] "fe80::1%eth0" is not an IPv4 or IPv6 address or CIDR block.'],
    [[''], 'allowedIps[0] "" is not an IPv4 or IPv6 address or CIDR block.'],
  ])('%p → %p', (value, problem) => {
    expect(allowedIpsProblem(value)).toBe(problem as string | undefined);
  });

  it('shows a long entry cut short', () => {
    const problem = allowedIpsProblem(['x'.repeat(10_000)]) ?? '';
    expect(problem.length).toBeLessThan(150);
    expect(problem).toStartWith('allowedIps[0] "xxx');
  });
});

describe('firstOutside', () => {
  it.each([
    [['10.1.0.0/16'], ['10.0.0.0/8'], undefined],
    [['10.1.0.0/16', '10.2.3.4'], ['10.0.0.0/8'], undefined],
    [['10.0.0.0/8'], ['10.0.0.0/8'], undefined],
    [['10.1.2.3', '2001:db8::1'], ['10.0.0.0/8', '2001:db8::/32'], undefined],
    [['::ffff:10.1.2.3'], ['10.0.0.0/8'], undefined],
    [['10.0.0.0/7'], ['10.0.0.0/8'], '10.0.0.0/7'],
    [['10.1.0.0/16', '11.0.0.1', '12.0.0.1'], ['10.0.0.0/8'], '11.0.0.1'],
    [['2001:db8::/31'], ['2001:db8::/32'], '2001:db8::/31'],
    // An entry may fit in any one old entry, not across two.
    [['10.0.0.0/23'], ['10.0.0.0/24', '10.0.1.0/24'], '10.0.0.0/23'],
    [['1.2.3.4'], ['::/0'], '1.2.3.4'],
  ])('%p inside %p: first outside %p', (next, previous, outside) => {
    expect(firstOutside(next, previous)).toBe(outside as string | undefined);
  });
});

describe('TRUSTED_PROXIES', () => {
  it.each([
    ['', [], ['127.0.0.1']],
    ['   ', [], ['127.0.0.1']],
    ['127.0.0.1', ['127.0.0.1', '::ffff:127.0.0.1'], ['127.0.0.2', '::1']],
    ['10.0.0.0/8, ::1 ,2001:db8::/32', ['10.9.9.9', '::1', '2001:db8::5'], ['11.0.0.1', '::2']],
    ['10.0.0.0/8,192.168.0.0/16', ['192.168.1.1', '10.0.0.1'], ['192.169.0.0']],
  ])('%p trusts %p, not %p', (text, inside, outside) => {
    expect(trustedProxiesProblem(text)).toBeUndefined();
    const trusted = parseTrustedProxies(text);
    for (const entry of inside) expect(trusted.contains(address(entry))).toBe(true);
    for (const entry of outside) expect(trusted.contains(address(entry))).toBe(false);
  });

  it.each([
    ['localhost', 'TRUSTED_PROXIES entry 1 must be an IPv4 or IPv6 address or CIDR block (got "localhost").'],
    ['10.0.0.0/8,', 'TRUSTED_PROXIES entry 2 must be an IPv4 or IPv6 address or CIDR block (got "").'],
    ['10.0.0.0/8,,::1', 'TRUSTED_PROXIES entry 2 must be an IPv4 or IPv6 address or CIDR block (got "").'],
    [
      '10.0.0.0/8, 10.0.0.0/33',
      'TRUSTED_PROXIES entry 2 must be an IPv4 or IPv6 address or CIDR block (got "10.0.0.0/33").',
    ],
    [
      '10.0.0.0/8 ::1',
      'TRUSTED_PROXIES entry 1 must be an IPv4 or IPv6 address or CIDR block (got "10.0.0.0/8 ::1").',
    ],
  ])('refuses %p', (text, problem) => {
    expect(trustedProxiesProblem(text)).toBe(problem);
    expect(() => parseTrustedProxies(text)).toThrow(problem);
  });
});
