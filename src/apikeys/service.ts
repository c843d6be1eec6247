// The rules of API keys: who may create or delete which key, levels that never escalate, the
// per-user cap, expiry. Knows no HTTP framework and no SQL.
import { generateKeyId, generateSecret, hashSecret, KEY_ID_PATTERN, secretMatches } from '../auth/secrets';
import type { Clock } from '../clock';
import { HttpError } from '../http/errors';
import type { ApiKeyView, CreateKeyInput } from './model';
import type { ApiKeyStore } from './store';

/** An authenticated caller: a token's subject, or the user behind an API key. */
export type Caller = { userId: number; level: number };

export type ApiKeyServiceOptions = {
  store: ApiKeyStore;
  clock: Clock;
  maxKeysPerUser: number;
};

export type ApiKeyService = ReturnType<typeof createApiKeyService>;

export function createApiKeyService({ store, clock, maxKeysPerUser }: ApiKeyServiceOptions) {
  return {
    /** The caller behind a key and secret, or null for an unknown, expired or wrongly-secreted key. */
    verifyKeySecret(key: string, secret: string): Caller | null {
      if (!KEY_ID_PATTERN.test(key)) return null;
      const row = store.findKey(key);
      // Hash the secret even for an unknown key so both answers take the same time.
      const matches = secretMatches(secret, row?.secretHash ?? UNKNOWN_KEY_HASH);
      if (!row || !matches || row.expiresAt <= clock()) return null;
      return { userId: row.userId, level: row.level };
    },

    async createKey(caller: Caller, input: CreateKeyInput): Promise<ApiKeyView> {
      if (input.level > caller.level) {
        throw new HttpError(403, `You may create keys up to level ${caller.level}, not ${input.level}.`);
      }
      const now = clock();
      const secret = generateSecret();
      const row = {
        id: generateKeyId(),
        secretHash: hashSecret(secret),
        userId: caller.userId,
        level: input.level,
        name: input.name,
        createdAt: now,
        expiresAt: now + input.expiresIn * 1000,
      };
      if ((await store.insertKeyWithinLimit(row, maxKeysPerUser)) === 'limit-reached') {
        throw new HttpError(409, `You already hold ${maxKeysPerUser} live keys, the most allowed.`);
      }
      return {
        key: row.id,
        secret,
        level: row.level,
        expiresAt: new Date(row.expiresAt).toISOString(),
        name: row.name,
        userId: row.userId,
      };
    },

    async revokeKey(caller: Caller, id: string): Promise<void> {
      if (!KEY_ID_PATTERN.test(id)) {
        throw new HttpError(400, 'The key id must be "kg_" followed by at least 22 letters and digits.');
      }
      const row = store.findKey(id);
      // Another user's key and an expired key look exactly like a missing one.
      if (!row || row.userId !== caller.userId || row.expiresAt <= clock()) throw keyNotFound();
      if (row.level > caller.level) {
        throw new HttpError(
          403,
          `You may delete keys up to level ${caller.level}; this key is level ${row.level}.`,
        );
      }
      if (!(await store.deleteKey(id))) throw keyNotFound();
    },
  };
}

const UNKNOWN_KEY_HASH = hashSecret('no key has this secret');

function keyNotFound(): HttpError {
  return new HttpError(404, 'No such key.');
}
