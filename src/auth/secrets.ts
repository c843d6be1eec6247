// Key IDs, secrets and their hashes. Secrets are 256 random bits, so one SHA-256 is enough at rest
// (no slow KDF needed: there is nothing to brute-force), compared in constant time.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_BODY_LENGTH = 22; // 22 uniform base62 characters carry 131 random bits (>= 128).
// The largest multiple of 62 that fits a byte: bytes at or above it are dropped, so no character is favoured.
const UNBIASED_BYTE_LIMIT = 248;

export const KEY_ID_PATTERN = /^kg_[A-Za-z0-9]{22,128}$/;

// Refilled for each id, never kept: allocating a fresh Buffer per call cost more than the rest of it.
const randomPool = new Uint8Array(32);

/** `kg_` + 22 base62 characters, each drawn uniformly from random bytes (rejection sampling). */
export function generateKeyId(): string {
  let body = '';
  while (body.length < KEY_BODY_LENGTH) {
    // 32 bytes almost always suffice (about 23 are needed); the loop draws more if they do not.
    crypto.getRandomValues(randomPool);
    for (let i = 0; i < randomPool.length && body.length < KEY_BODY_LENGTH; i++) {
      const byte = randomPool[i] as number;
      if (byte < UNBIASED_BYTE_LIMIT) body += BASE62[byte % 62];
    }
  }
  return `kg_${body}`;
}

/** 256 random bits, base64url (43 URL-safe characters). */
export function generateSecret(): string {
  return randomBytes(32).toString('base64url');
}

export function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

/** Constant-time: compares the two hashes whole, so the time taken says nothing about the secret. */
export function secretMatches(secret: string, storedHash: Uint8Array): boolean {
  const candidate = hashSecret(secret);
  return candidate.length === storedHash.length && timingSafeEqual(candidate, storedHash);
}
