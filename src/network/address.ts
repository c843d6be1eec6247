// IP addresses as numbers, so that a key's allowedIps and TRUSTED_PROXIES compare by arithmetic, not
// by text: strict parsing of every IPv4 and IPv6 textual form, and one canonical way to write each.
// An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is its IPv4 address, as docs/permissions.md says, so
// a dual-stack socket's peer `::ffff:203.0.113.7` matches the block 203.0.113.0/24.

/** An IPv4 address (value < 2^32) or an IPv6 address that is not IPv4-mapped (value < 2^128). */
export type Address = { readonly version: 4 | 6; readonly value: bigint };

// The longest textual address: eight groups with an IPv4 tail, "ffff:…:ffff:255.255.255.255".
const LONGEST_ADDRESS = 45;

// Each part 0..255 written without leading zeros ("0" alone is fine), as inet_pton does: "010" is
// octal to some parsers and decimal to others, so an address that reads two ways is refused.
const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

const IPV4_BITS = 0xffffffffn;

/** The address `text` spells (any case, `::` anywhere, an IPv4 tail), or undefined; zones, brackets and ports are refused. */
export function parseAddress(text: string): Address | undefined {
  if (text.length > LONGEST_ADDRESS) return undefined;
  if (!text.includes(':')) {
    const value = parseIpv4(text);
    return value === undefined ? undefined : { version: 4, value };
  }
  const value = parseIpv6(text);
  if (value === undefined) return undefined;
  return isMapped(value) ? { version: 4, value: value & IPV4_BITS } : { version: 6, value };
}

/** Whether a 128-bit IPv6 value lies in ::ffff:0:0/96, the IPv4-mapped addresses. */
function isMapped(ipv6: bigint): boolean {
  return ipv6 >> 32n === 0xffffn;
}

/** The 32-bit value of a dotted quad, or undefined. */
function parseIpv4(text: string): bigint | undefined {
  if (!IPV4.test(text)) return undefined;
  let value = 0n;
  for (const part of text.split('.')) value = (value << 8n) | BigInt(Number(part));
  return value;
}

/** The 128-bit value of an IPv6 text (RFC 4291 §2.2: groups, one `::`, an optional IPv4 tail), or undefined. */
function parseIpv6(text: string): bigint | undefined {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const head = groupsOf(halves[0] ?? '', halves.length === 1);
  const tail = halves.length === 2 ? groupsOf(halves[1] ?? '', true) : [];
  if (head === undefined || tail === undefined) return undefined;
  const given = head.length + tail.length;
  // Without `::` all eight groups are written; with it, `::` stands for at least one zero group.
  if (halves.length === 1 ? given !== 8 : given > 7) return undefined;
  const groups = [...head, ...new Array<number>(8 - given).fill(0), ...tail];
  let value = 0n;
  for (const group of groups) value = (value << 16n) | BigInt(group);
  return value;
}

/** The 16-bit groups of one side of `::` (empty text: none); an IPv4 tail, allowed only at the very end, counts as two. */
function groupsOf(text: string, mayEndInIpv4: boolean): number[] | undefined {
  if (text === '') return [];
  const parts = text.split(':');
  const groups: number[] = [];
  for (const [index, part] of parts.entries()) {
    if (HEX_GROUP.test(part)) {
      groups.push(Number.parseInt(part, 16));
      continue;
    }
    if (!mayEndInIpv4 || index !== parts.length - 1) return undefined;
    const ipv4 = parseIpv4(part);
    if (ipv4 === undefined) return undefined;
    groups.push(Number(ipv4 >> 16n), Number(ipv4 & 0xffffn));
  }
  return groups;
}

/** The canonical text: a dotted quad, or RFC 5952 (lower case, no leading zeros, the longest zero run as `::`). */
export function formatAddress(address: Address): string {
  return address.version === 4 ? formatIpv4(address.value) : formatIpv6(address.value);
}

function formatIpv4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join('.');
}

// RFC 5952 §5 suggests a dotted tail for some prefixes (64:ff9b::/96); plain hex is also canonical
// there, is what a reader can compare with a list entry, and keeps one rule for every address.
function formatIpv6(value: bigint): string {
  const groups = Array.from({ length: 8 }, (_, index) =>
    Number((value >> BigInt(112 - 16 * index)) & 0xffffn),
  );
  // RFC 5952 §4.2.2: `::` never shortens a single zero group; §4.2.3: the longest run, the first of equals.
  let bestStart = -1;
  let bestLength = 1;
  for (let start = 0; start < 8; ) {
    if (groups[start] !== 0) {
      start++;
      continue;
    }
    let end = start;
    while (end < 8 && groups[end] === 0) end++;
    if (end - start > bestLength) {
      bestStart = start;
      bestLength = end - start;
    }
    start = end;
  }
  const hex = (part: number[]) => part.map((group) => group.toString(16)).join(':');
  if (bestStart === -1) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`;
}
