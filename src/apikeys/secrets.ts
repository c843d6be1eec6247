// Key IDs, secrets and their hashes. Secrets are 256 random bits, so one SHA-256 is enough at rest
// (no slow KDF needed: there is nothing to brute-force), compared in constant time. New secrets
// carry a prefix (SECRET_PREFIX) and a checksum so that secret scanners find them and keygate refuses
// typos unread.
import { timingSafeEqual } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_RANDOM_LENGTH = 22; // 22 uniform base62 characters carry 131 random bits (>= 128).
const KEY_TIME_LENGTH = 8; // milliseconds since 1970 in 8 base62 digits: enough for ~6,900 years.
// The largest multiple of 62 that fits a byte: bytes at or above it are dropped, so no character is favoured.
const UNBIASED_BYTE_LIMIT = 248;

export const KEY_ID_PATTERN = /^kg_[A-Za-z0-9]{22,128}$/;

// Refilled for each id, never kept: allocating a fresh Buffer per call cost more than the rest of it.
const randomPool = new Uint8Array(32);

/**
 * `kg_` + the creation time (8 base62 digits of milliseconds) + 22 base62 characters, each drawn
 * uniformly from random bytes (rejection sampling). The time prefix makes ids of new keys sort after
 * older ones (the alphabet is in ASCII order), so inserts land at the end of the primary-key index
 * instead of on a random page of it: with a million keys stored, a commit then writes a few pages
 * rather than one per key. The uniqueness and the 131 random bits are all in the random part.
 */
export function generateKeyId(createdAt: number): string {
  return `kg_${base62Digits(Math.max(0, Math.floor(createdAt)), KEY_TIME_LENGTH)}${randomBase62(KEY_RANDOM_LENGTH)}`;
}

/** A whole number in `length` base62 digits, most significant first, padded with zeros. */
function base62Digits(value: number, length: number): string {
  let digits = '';
  let rest = value;
  for (let i = 0; i < length; i++) {
    digits = BASE62[rest % 62] + digits;
    rest = Math.floor(rest / 62);
  }
  return digits;
}

function randomBase62(length: number): string {
  let body = '';
  while (body.length < length) {
    // 32 bytes almost always give a key id (about 23 are needed); a secret takes two draws.
    crypto.getRandomValues(randomPool);
    for (let i = 0; i < randomPool.length && body.length < length; i++) {
      const byte = randomPool[i] as number;
      if (byte < UNBIASED_BYTE_LIMIT) body += BASE62[byte % 62];
    }
  }
  return body;
}

/** The prefix of new secrets unless SECRET_PREFIX names another. */
export const DEFAULT_SECRET_PREFIX = 'kgs_';
/** SECRET_PREFIX's rule: 2 to 16 characters of a–z 0–9 _, the last one `_`. */
export const SECRET_PREFIX_PATTERN = /^[a-z0-9_]{1,15}_$/;
const SECRET_BODY_LENGTH = 43; // 43 uniform base62 characters carry 256.03 random bits.
const CHECKSUM_LENGTH = 6; // 62^6 > 2^32: any CRC32 fits.
/** Body and checksum: what follows the prefix in every secret of the checksummed format. */
const CHECKSUMMED_LENGTH = SECRET_BODY_LENGTH + CHECKSUM_LENGTH;
/** A secret of the format before prefixes: 32 random bytes in base64url, no prefix. */
const PRE_PREFIX_SECRET = /^[A-Za-z0-9_-]{43}$/;

/** What secret scanners look for (docs/security.md): `prefix`, 43 base62 characters, 6 of checksum. */
export function secretPattern(prefix = DEFAULT_SECRET_PREFIX): RegExp {
  return new RegExp(`^${prefix}[0-9A-Za-z]{${CHECKSUMMED_LENGTH}}$`);
}
export const SECRET_PATTERN = secretPattern();

/** `prefix` + 43 random base62 characters + 6 base62 characters of their CRC32 (as GitHub's tokens). */
export function generateSecret(prefix = DEFAULT_SECRET_PREFIX): string {
  const body = randomBase62(SECRET_BODY_LENGTH);
  return `${prefix}${body}${checksumOf(body)}`;
}

/**
 * False only for a secret that cannot be one keygate issued, so it is refused before any lookup:
 * - one of the checksummed shape (any prefix of SECRET_PREFIX's rule, then exactly 49 base62
 *   characters) whose checksum is wrong. The checksum covers only the 43 characters after the
 *   prefix, whatever the prefix: secrets issued under an earlier SECRET_PREFIX are checked too, and,
 *   being keygate's own, always pass. The split is by length (the 49 are base62, so the prefix ends
 *   with the `_` just before them), so no prefix can be mistaken for another's;
 * - one that starts with `prefix` (the configured one) or `kgs_` but has not that shape (cut short,
 *   too long, a character outside base62): none of keygate's secrets looks like that, except a
 *   secret of the format before prefixes (43 base64url characters) that happens to start with those
 *   characters, which is let through. Such secrets are at most 43 characters long, and every
 *   checksummed one at least 51, so no earlier secret is refused.
 * Anything else (the earlier format, a damaged copy of a secret of an earlier custom prefix) is
 * looked up as before: an unknown secret is the same answer either way, only slower.
 */
export function isWellFormedSecret(secret: string, prefix = DEFAULT_SECRET_PREFIX): boolean {
  const bodyStart = secret.length - CHECKSUMMED_LENGTH;
  if (bodyStart >= 2 && bodyStart <= 16 && isChecksummedShape(secret, bodyStart)) {
    return checksumHolds(secret, bodyStart);
  }
  if (!secret.startsWith(prefix) && !secret.startsWith(DEFAULT_SECRET_PREFIX)) return true;
  return PRE_PREFIX_SECRET.test(secret);
}

const UNDERSCORE = 0x5f;
const NOT_BASE62 = 255;

/** A prefix of SECRET_PREFIX's rule up to `bodyStart`, then base62 characters only. */
function isChecksummedShape(secret: string, bodyStart: number): boolean {
  if (secret.charCodeAt(bodyStart - 1) !== UNDERSCORE) return false;
  for (let i = 0; i < bodyStart; i++) {
    const c = secret.charCodeAt(i);
    if (!((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === UNDERSCORE)) return false;
  }
  for (let i = bodyStart; i < secret.length; i++) {
    const c = secret.charCodeAt(i);
    if (c >= 128 || BASE62_VALUES[c] === NOT_BASE62) return false;
  }
  return true;
}

/**
 * The checksum read back as a number (the shape let only base62 digits through) rather than the
 * body's CRC written out as text: a verify or forward-auth checks one on every request.
 */
function checksumHolds(secret: string, bodyStart: number): boolean {
  const bodyEnd = bodyStart + SECRET_BODY_LENGTH;
  let written = 0;
  for (let i = bodyEnd; i < secret.length; i++) {
    written = written * 62 + (BASE62_VALUES[secret.charCodeAt(i)] as number);
  }
  return written === Bun.hash.crc32(secret.slice(bodyStart, bodyEnd));
}

/** Each base62 digit's value, by character code (the digits are ASCII). */
const BASE62_VALUES = new Uint8Array(128).fill(NOT_BASE62);
for (let i = 0; i < BASE62.length; i++) BASE62_VALUES[BASE62.charCodeAt(i)] = i;

/** CRC32 of the body in base62, most significant digit first, padded with zeros to 6. */
export function checksumOf(body: string): string {
  return base62Digits(Bun.hash.crc32(body), CHECKSUM_LENGTH);
}

/** SHA-256 of the secret's UTF-8 bytes. Bun's one-shot hash: a fifth of node:crypto's createHash. */
export function hashSecret(secret: string): Buffer {
  return Bun.SHA256.hash(secret, Buffer.alloc(32)) as Buffer;
}

// The candidate hash of each check, overwritten by the next: a check is synchronous, so none overlap.
const candidate = new Uint8Array(32);

/** Constant-time: compares the two hashes whole, so the time taken says nothing about the secret. */
export function secretMatches(secret: string, storedHash: Uint8Array): boolean {
  Bun.SHA256.hash(secret, candidate);
  return candidate.length === storedHash.length && timingSafeEqual(candidate, storedHash);
}
