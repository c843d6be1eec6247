// Where a webhook may go (its safety rules): an https URL whose host is not, and does not resolve to, a
// loopback, private, link-local or unspecified address, unless WEBHOOK_ALLOW_PRIVATE=true (which also
// allows http). The URL is checked at creation (an address literal); a host name when sending, on the
// addresses it resolves to.
import { lookup } from 'node:dns/promises';
import { parseAddress } from '../network/address';
import { addressList } from '../network/blocks';

// Loopback, RFC 1918 and shared/CGNAT space, link-local, unspecified, and their IPv6 peers (ULA,
// link-local, site-local, loopback, unspecified); IPv4-mapped forms parse as IPv4 (address.ts).
const PRIVATE = addressList([
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '::/128',
  '::1/128',
  'fc00::/7',
  'fe80::/10',
  'fec0::/10',
]);

export const isPrivateAddress = (text: string): boolean => PRIVATE.contains(parseAddress(text));

/** The host of a URL without IPv6 brackets. */
const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1');

/** Why `text` cannot be an endpoint's URL, in one sentence, or undefined when it may. */
export function endpointUrlProblem(text: unknown, allowPrivate: boolean): string | undefined {
  if (typeof text !== 'string' || text.length === 0 || text.length > 2000) {
    return 'url must be an absolute https URL of at most 2000 characters.';
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'url must be an absolute https URL.';
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) {
    return 'url must be an https URL (http only with WEBHOOK_ALLOW_PRIVATE=true).';
  }
  if (url.username !== '' || url.password !== '') return 'url must not hold a user name or password.';
  if (!allowPrivate && isPrivateAddress(hostOf(url))) {
    return 'url must not point to a loopback, private, link-local or unspecified address (unless WEBHOOK_ALLOW_PRIVATE=true).';
  }
  return undefined;
}

/** The host's addresses (an address literal is its own). */
export type Resolver = (host: string) => Promise<string[]>;

export const systemResolver: Resolver = async (host) => {
  if (parseAddress(host) !== undefined) return [host];
  return (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address);
};

/** Why a message may not be sent to `url` now (its host resolves to a private address), or undefined. */
export async function sendingProblem(
  text: string,
  allowPrivate: boolean,
  resolve: Resolver,
): Promise<string | undefined> {
  const url = new URL(text);
  if (allowPrivate) return undefined;
  if (url.protocol !== 'https:') return 'the URL is not https';
  let addresses: string[];
  try {
    addresses = await resolve(hostOf(url));
  } catch (error) {
    return `the host did not resolve (${(error as { code?: string }).code ?? 'error'})`;
  }
  if (addresses.length === 0) return 'the host did not resolve';
  const refused = addresses.find(isPrivateAddress);
  return refused === undefined
    ? undefined
    : `the host resolves to ${refused}, a loopback, private, link-local or unspecified address`;
}
