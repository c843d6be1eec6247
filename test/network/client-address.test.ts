// The client's address behind trusted proxies (nginx's real_ip_recursive): an untrusted peer is the
// client whatever X-Forwarded-For says; behind trusted proxies, the rightmost untrusted entry.
import { describe, expect, it } from 'bun:test';
import { formatAddress } from '../../src/network/address';
import { parseTrustedProxies } from '../../src/network/blocks';
import { clientAddressOf } from '../../src/network/client-address';

const trusted = parseTrustedProxies('10.0.0.0/8, 127.0.0.1, 2001:db8::/32');

function clientOf(
  peer: string | undefined,
  forwardedFor: string | null,
  proxies = trusted,
): string | undefined {
  const address = clientAddressOf(peer, forwardedFor, proxies);
  return address && formatAddress(address);
}

describe('clientAddressOf', () => {
  it.each([
    // An untrusted peer is the client, whatever it claims.
    ['203.0.113.7', null, '203.0.113.7'],
    ['203.0.113.7', '10.0.0.1', '203.0.113.7'],
    ['203.0.113.7', '198.51.100.1, 10.0.0.1', '203.0.113.7'],
    ['2001:db9::1', '198.51.100.1', '2001:db9::1'],
    // Bun's forms of a peer.
    ['::1', null, '::1'],
    ['::ffff:203.0.113.7', '10.0.0.1', '203.0.113.7'],
    // A trusted peer without the header is the client.
    ['10.0.0.5', null, '10.0.0.5'],
    ['127.0.0.1', null, '127.0.0.1'],
    // A trusted peer: the rightmost entry that is not trusted.
    ['10.0.0.5', '198.51.100.1', '198.51.100.1'],
    ['::ffff:127.0.0.1', '198.51.100.1', '198.51.100.1'],
    ['10.0.0.5', '198.51.100.1, 10.0.0.9', '198.51.100.1'],
    ['10.0.0.5', '198.51.100.1,10.0.0.9,127.0.0.1', '198.51.100.1'],
    ['10.0.0.5', '6.6.6.6, 198.51.100.1, 10.0.0.9', '198.51.100.1'],
    ['2001:db8::1', '2001:db9::7, 2001:db8::2', '2001:db9::7'],
    ['10.0.0.5', '::ffff:198.51.100.1', '198.51.100.1'],
    ['10.0.0.5', '  198.51.100.1  ', '198.51.100.1'],
    // Every entry trusted: the leftmost.
    ['10.0.0.5', '10.0.0.1', '10.0.0.1'],
    ['10.0.0.5', '10.0.0.1, 10.0.0.2, 127.0.0.1', '10.0.0.1'],
    // An entry that is not an address stops the scan: an address no list contains.
    ['10.0.0.5', 'garbage', undefined],
    ['10.0.0.5', '198.51.100.1, garbage', undefined],
    ['10.0.0.5', '198.51.100.1, unknown, 10.0.0.9', undefined],
    ['10.0.0.5', '198.51.100.1:4711', undefined],
    ['10.0.0.5', '[2001:db9::7]', undefined],
    ['10.0.0.5', '', undefined],
    ['10.0.0.5', '198.51.100.1,,10.0.0.9', undefined],
    // Left of the first untrusted entry nothing is read, not even garbage.
    ['10.0.0.5', 'garbage, 198.51.100.1, 10.0.0.9', '198.51.100.1'],
    // An unknown or unreadable peer.
    [undefined, '198.51.100.1', undefined],
    [undefined, null, undefined],
    ['not-an-address', '198.51.100.1', undefined],
  ])('peer %p, X-Forwarded-For %p → %p', (peer, forwardedFor, client) => {
    expect(clientOf(peer, forwardedFor)).toBe(client as string | undefined);
  });

  it('trusts nobody when TRUSTED_PROXIES is empty', () => {
    expect(clientOf('127.0.0.1', '198.51.100.1', parseTrustedProxies(''))).toBe('127.0.0.1');
  });

  it('reads several X-Forwarded-For headers as Headers.get joins them', () => {
    const headers = new Headers();
    headers.append('x-forwarded-for', '6.6.6.6');
    headers.append('x-forwarded-for', '198.51.100.1, 10.0.0.9');
    expect(clientOf('10.0.0.5', headers.get('x-forwarded-for'))).toBe('198.51.100.1');
  });
});
