// Stored rows for the store tests, which call an ApiKeyStore directly (no HTTP, no service).
import type { ApiKeyRow } from '../../src/apikeys/store';

/** A row of user 1, level 1, created at 1000 and expiring at 100,000 (ms), with `fields` over it. */
export const row = (id: string, fields: Partial<ApiKeyRow> = {}): ApiKeyRow => ({
  id,
  secretHash: new Uint8Array(32),
  userId: 1,
  level: 1,
  name: id,
  createdAt: 1000,
  expiresAt: 100_000,
  ...fields,
});

/** The n-th well-formed key id: `kg_` and n padded to 22 digits. */
export const id = (n: number) => `kg_${String(n).padStart(22, '0')}`;
