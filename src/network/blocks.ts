// CIDR blocks and lists of them: a key's allowedIps, whether a key narrowing itself stays
// inside its old list, and the TRUSTED_PROXIES setting. Entries are parsed once into numbers, so a
// verification asks a list about an address with a mask and a comparison per block.
import { type Address, parseAddress } from './address';

/** Every address whose first `prefix` bits equal `network`'s (a bare address is a block of one). */
export type AddressBlock = { readonly version: 4 | 6; readonly network: bigint; readonly prefix: number };

/** Entries a key or setting allows; `undefined` is "an address no list contains" (an unreadable X-Forwarded-For). */
export type AddressList = { contains(address: Address | undefined): boolean };

const BITS = { 4: 32, 6: 128 } as const;
const MAPPED_PREFIX_BITS = 96;
const MOST_ALLOWED_IPS = 50;
const PREFIX = /^(?:0|[1-9]\d{0,2})$/;
// The longest block, "ffff:…:255.255.255.255/128"; longer text is shown cut short in a message.
const LONGEST_BLOCK = 49;

const MASKS = {
  4: masksOf(BITS[4]),
  6: masksOf(BITS[6]),
};

function masksOf(bits: number): bigint[] {
  const all = (1n << BigInt(bits)) - 1n;
  return Array.from({ length: bits + 1 }, (_, prefix) => all ^ ((1n << BigInt(bits - prefix)) - 1n));
}

function maskOf(version: 4 | 6, prefix: number): bigint {
  return MASKS[version][prefix] ?? 0n;
}

/**
 * The block `text` spells: an address (a block of one) or `address/prefix` (IPv4 0..32, IPv6
 * 0..128). An IPv4-mapped block (`::ffff:10.0.0.0/104`) is its IPv4 block (10.0.0.0/8); one wider
 * than the mapped range (prefix below 96) is refused, since it would mix IPv4 and IPv6 addresses.
 * Bits set after the prefix are cleared (`10.1.2.3/8` is 10.0.0.0/8), as Google Cloud and Kong
 * accept such blocks: what the operator meant is not in doubt, and refusing would only annoy.
 */
export function parseBlock(text: string): AddressBlock | undefined {
  const slash = text.indexOf('/');
  const addressText = slash === -1 ? text : text.slice(0, slash);
  const address = parseAddress(addressText);
  if (address === undefined) return undefined;
  const writtenAsIpv6 = addressText.includes(':');
  const writtenBits = writtenAsIpv6 ? BITS[6] : BITS[4];
  let prefix: number = writtenBits;
  if (slash !== -1) {
    const prefixText = text.slice(slash + 1);
    if (!PREFIX.test(prefixText)) return undefined;
    prefix = Number(prefixText);
    if (prefix > writtenBits) return undefined;
  }
  if (writtenAsIpv6 && address.version === 4) {
    if (prefix < MAPPED_PREFIX_BITS) return undefined;
    prefix -= MAPPED_PREFIX_BITS;
  }
  return { version: address.version, network: address.value & maskOf(address.version, prefix), prefix };
}

/** Whether `address` is in `block`; an IPv4 address is never in an IPv6 block, nor the other way round. */
export function blockContains(block: AddressBlock, address: Address): boolean {
  return (
    block.version === address.version &&
    (address.value & maskOf(block.version, block.prefix)) === block.network
  );
}

/** Whether every address of `inner` is in `outer`. */
export function blockWithin(inner: AddressBlock, outer: AddressBlock): boolean {
  return (
    inner.version === outer.version &&
    inner.prefix >= outer.prefix &&
    (inner.network & maskOf(outer.version, outer.prefix)) === outer.network
  );
}

/**
 * The list of already validated entries (allowedIps as stored, TRUSTED_PROXIES once checked). An
 * entry that does not parse is a bug upstream of here, so it throws rather than being skipped.
 */
export function addressList(entries: readonly string[]): AddressList {
  const blocks = entries.map((entry) => {
    const block = parseBlock(entry);
    if (block === undefined) throw new TypeError(`${quoted(entry)} is not an address or CIDR block.`);
    return block;
  });
  return {
    contains: (address) => address !== undefined && blocks.some((block) => blockContains(block, address)),
  };
}

/**
 * Why a key's `allowedIps` is refused, in one sentence, or undefined when it is fine: an array of
 * 1..50 strings, each an address or CIDR block. Duplicates are allowed: the contract does not ask
 * for distinct entries (as it does for permissions), and a repeated block changes nothing.
 */
export function allowedIpsProblem(value: unknown): string | undefined {
  if (!Array.isArray(value)) {
    return `allowedIps must be an array of 1 to ${MOST_ALLOWED_IPS} IPv4 or IPv6 addresses or CIDR blocks.`;
  }
  if (value.length === 0 || value.length > MOST_ALLOWED_IPS) {
    return `allowedIps must hold 1 to ${MOST_ALLOWED_IPS} entries (it holds ${value.length}).`;
  }
  for (const [index, entry] of value.entries()) {
    if (typeof entry !== 'string') return `allowedIps[${index}] must be a string.`;
    if (parseBlock(entry) === undefined) {
      return `allowedIps[${index}] ${quoted(entry)} is not an IPv4 or IPv6 address or CIDR block.`;
    }
  }
  return undefined;
}

/**
 * For a key narrowing its own allowedIps: the first entry of `next` that is not inside some entry of
 * `previous` (both validated), or undefined when the new list allows nothing the old did not.
 */
export function firstOutside(next: readonly string[], previous: readonly string[]): string | undefined {
  const outers = previous.flatMap((entry) => parseBlock(entry) ?? []);
  return next.find((entry) => {
    const inner = parseBlock(entry);
    return inner === undefined || !outers.some((outer) => blockWithin(inner, outer));
  });
}

/** Why the TRUSTED_PROXIES setting is refused, in one line, or undefined; see {@link parseTrustedProxies}. */
export function trustedProxiesProblem(text: string): string | undefined {
  for (const [index, entry] of trustedProxyEntries(text).entries()) {
    if (parseBlock(entry) === undefined) {
      return `TRUSTED_PROXIES entry ${index + 1} must be an IPv4 or IPv6 address or CIDR block (got ${quoted(entry)}).`;
    }
  }
  return undefined;
}

/** TRUSTED_PROXIES: a comma list of addresses and CIDR blocks, spaces around commas allowed; empty trusts no one. */
export function parseTrustedProxies(text: string): AddressList {
  const problem = trustedProxiesProblem(text);
  if (problem !== undefined) throw new TypeError(problem);
  return addressList(trustedProxyEntries(text));
}

function trustedProxyEntries(text: string): string[] {
  if (text.trim() === '') return [];
  return text.split(',').map((entry) => entry.trim());
}

function quoted(text: string): string {
  return JSON.stringify(text.length > LONGEST_BLOCK + 10 ? `${text.slice(0, LONGEST_BLOCK + 10)}…` : text);
}
