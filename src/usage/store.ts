// The UsageStore interface: usage rows in, usage rows out, no rules. The implementations are
// src/db/sqlite/usage-store.ts and src/db/postgres/usage-store.ts. A key's rows are removed with the
// key by the ApiKeyStore itself, in the same transaction as the key.
import type { UsageBatch, UsageRow } from './counter';

export interface UsageStore {
  /**
   * One write for the whole batch: each row is added to the key's stored hour (created when absent)
   * and each key's last_used_at moves to the later of the two; ids that name no key (any more) are
   * skipped, so no row is ever stored for them. The verification counts, when the batch has them,
   * are added to their stored (hour, code) rows in the same transaction. Resolves once committed.
   */
  writeUsage(batch: UsageBatch): Promise<void>;

  /** The key's stored hour rows with `from <= bucket <= to`, in ascending order. */
  readUsage(keyId: string, from: number, to: number): Promise<UsageRow[]>;

  /**
   * The hour rows of every key the user holds, summed per hour, with `from <= bucket <= to`, in
   * ascending order (`keyId` is the empty string: they are no one key's).
   */
  readUserUsage(userId: number, from: number, to: number): Promise<UsageRow[]>;

  /**
   * Deletes up to `limit` key usage rows whose hour began before `before`, and resolves with how
   * many; with them every verification count and key creation count of those hours (a few rows an
   * hour, not counted).
   */
  deleteUsageBefore(before: number, limit: number): Promise<number>;
}
