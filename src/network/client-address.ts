// The address a request comes from, for a key's allowedIps: the TCP peer, or, when the peer is
// a trusted proxy, the address that proxy (and the trusted ones before it) saw in X-Forwarded-For.
import { type Address, parseAddress } from './address';
import type { AddressList } from './blocks';

/**
 * The client's address: the peer (as Bun gives it: `127.0.0.1`, `::1`, `::ffff:127.0.0.1`) unless
 * `trusted` holds it and an X-Forwarded-For header came; then, walking that header's entries from
 * the right, the first that is not trusted, or the leftmost when all are (nginx's
 * `real_ip_recursive on`). Undefined when the peer is unknown or an entry is not an address: an
 * address no list contains, so a key with allowedIps is refused rather than let in on a guess.
 *
 * Each proxy appends the address it received from, so only entries right of the last untrusted one
 * were written by proxies we trust. Everything further left, the leftmost above all, is whatever the
 * client sent: trusting it would let any client choose its own address. The leftmost is taken only
 * when every entry is a trusted proxy's, which then names the innermost of them.
 */
export function clientAddressOf(
  peer: string | undefined,
  forwardedFor: string | null,
  trusted: AddressList,
): Address | undefined {
  const peerAddress = peer === undefined ? undefined : parseAddress(peer);
  if (peerAddress === undefined || forwardedFor === null || !trusted.contains(peerAddress))
    return peerAddress;
  const entries = forwardedFor.split(',');
  let address: Address | undefined;
  for (let index = entries.length - 1; index >= 0; index--) {
    // An empty entry (`a,,b`, an empty header) is not an address either: the scan stops there.
    address = parseAddress((entries[index] ?? '').trim());
    if (address === undefined || !trusted.contains(address)) return address;
  }
  return address;
}
