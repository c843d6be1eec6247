// Key IDs, secrets and their hashes. Secrets are 256 random bits, so one SHA-256 is enough at rest
// (no slow KDF needed: there is nothing to brute-force), compared in constant time.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_BODY_LENGTH = 22; // 62^22 > 2^128: 128 random bits always fit.

export const KEY_ID_PATTERN = /^kg_[A-Za-z0-9]{22,128}$/;

/** `kg_` + 22 base62 characters carrying 128 random bits. */
export function generateKeyId(): string {
  let value = BigInt(`0x${randomBytes(16).toString('hex')}`);
  let body = '';
  for (let i = 0; i < KEY_BODY_LENGTH; i++) {
    body = BASE62[Number(value % 62n)] + body;
    value /= 62n;
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
