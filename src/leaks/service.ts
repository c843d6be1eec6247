// The rules of leaked secrets: a reported secret is looked up by its hash alone (no key id comes
// with it), and each live key it belongs to gets LEAK_ACTION, one transaction per key: `disable`
// is the update path's enabled=false (so every replica refuses the key within a second, as after any
// update), `delete` the delete path, `notify` changes nothing the key does. Every leak found is
// marked on the key (leakedAt, leakSource: key info shows them), writes the webhooks' `key.leaked`
// (and the change's own event) in the same transaction, and is told to the key events as the change
// it is and to `onLeak` (the audit line `apikey.leaked`).
// Knows no HTTP: the GitHub receiver and /admin/leaks (routes.ts) both come here.
import type { KeyEvents } from '../apikeys/audit';
import { hashSecret, isWellFormedSecret } from '../apikeys/secrets';
import type { ApiKeyService } from '../apikeys/service';
import type { ApiKeyRow, ApiKeyStore } from '../apikeys/store';
import type { LeakAction } from '../config';
import type { Clock } from '../core/clock';

/** What a leaked secret's key got. */
export type LeakOutcome = 'disabled' | 'deleted' | 'notified';

const OUTCOME_OF: Record<LeakAction, LeakOutcome> = {
  disable: 'disabled',
  delete: 'deleted',
  notify: 'notified',
};

/** One leak found: what the hook is told. Never the secret, a hash or a token. */
export type LeakFound = {
  key: string;
  userId: number;
  /** Who reported it: `github:<where GitHub found it>`, or the /admin/leaks body's `source`. */
  source: string;
  /** Where it was found, when the report says (GitHub's alerts do); else null. */
  url: string | null;
  action: LeakOutcome;
  /** `github`, or `admin:<sub>`, as the key events' `by`. */
  by: string;
  requestId: string | undefined;
  /** ISO 8601 with milliseconds. */
  at: string;
};

/** Called once for each leak found, after the key's action committed. Wired in src/keygate.ts (the audit log). */
export type OnLeak = (found: LeakFound) => void;

/** A secret as a scanner reported it; `source` replaces the batch's own for this one. */
export type LeakReport = { secret: string; url: string | null; source?: string };

export type LeakService = ReturnType<typeof createLeakService>;

export function createLeakService({
  store,
  apikeys,
  clock,
  secretPrefix,
  action,
  events,
  onLeak,
}: {
  store: Pick<ApiKeyStore, 'findKeysBySecretHashes' | 'updateKey' | 'deleteKey'>;
  /** The key events each leak's write carries (key.leaked, and the change's own), in its transaction. */
  apikeys: Pick<ApiKeyService, 'leakHooks' | 'eventsWritten'>;
  clock: Clock;
  /** SECRET_PREFIX: a secret of the checksummed shape with a wrong checksum is no one's (secrets.ts). */
  secretPrefix: string;
  action: LeakAction;
  events: KeyEvents;
  onLeak: OnLeak;
}) {
  /**
   * The key's action, in one transaction with its events (key.leaked among them); false when the key
   * went meanwhile.
   */
  async function act(
    row: ApiKeyRow,
    report: { source: string; url: string | null; by: string },
    now: number,
  ) {
    const hooks = apikeys.leakHooks(row, report.by, {
      source: report.source,
      url: report.url,
      action: OUTCOME_OF[action],
    });
    let done: boolean;
    if (action === 'delete') done = await store.deleteKey(row.id, undefined, hooks.deleted);
    else {
      // The first report is kept: it says since when the secret has been out.
      const marker = { leakedAt: row.leakedAt ?? now, leakSource: row.leakSource ?? report.source };
      const update = action === 'disable' ? { enabled: false, ...marker } : marker;
      done = (await store.updateKey(row.id, update, now, undefined, hooks.updated)) !== undefined;
    }
    if (done && (hooks.deleted !== undefined || hooks.updated !== undefined)) apikeys.eventsWritten();
    return done;
  }

  return {
    /**
     * For each report, in order, the live keys its secret belongs to and what they got (an empty
     * list: a false positive). A secret reported twice is acted on once.
     */
    async reportLeaks(
      reports: readonly LeakReport[],
      { source, by, requestId }: { source: string; by: string; requestId: string | undefined },
    ): Promise<Array<Array<{ key: string; action: LeakOutcome }>>> {
      const now = clock();
      // A secret of the checksummed shape whose checksum is wrong asks the database nothing.
      const candidates = [...new Set(reports.map((report) => report.secret))].filter((secret) =>
        isWellFormedSecret(secret, secretPrefix),
      );
      const hashOf = new Map(candidates.map((secret) => [secret, hashSecret(secret).toString('hex')]));
      const rows =
        candidates.length === 0 ? [] : await store.findKeysBySecretHashes([...hashOf.values()].map(hexBytes));
      const liveByHash = new Map<string, ApiKeyRow[]>();
      for (const row of rows) {
        if (row.expiresAt <= now) continue;
        const hash = Buffer.from(row.secretHash).toString('hex');
        liveByHash.set(hash, [...(liveByHash.get(hash) ?? []), row]);
      }
      // The first report of a secret says where it was found.
      const firstReport = new Map<string, LeakReport>();
      for (const report of reports)
        if (!firstReport.has(report.secret)) firstReport.set(report.secret, report);
      const outcome = OUTCOME_OF[action];
      const acted = new Map<string, Array<{ key: string; action: LeakOutcome }>>();
      // Together, so that the group commit may share one transaction among them (each its own savepoint).
      await Promise.all(
        candidates.map(async (secret) => {
          const done: Array<{ key: string; action: LeakOutcome }> = [];
          const report = firstReport.get(secret);
          const reportSource = report?.source ?? source;
          for (const row of liveByHash.get(hashOf.get(secret) as string) ?? []) {
            if (!(await act(row, { source: reportSource, url: report?.url ?? null, by }, now))) continue;
            done.push({ key: row.id, action: outcome });
            const change = { key: row.id, userId: row.userId, by, requestId };
            if (action === 'delete') events.deleted(change);
            else if (action === 'disable') events.updated({ ...change, changed: ['enabled'] });
            onLeak({
              key: row.id,
              userId: row.userId,
              source: reportSource,
              url: report?.url ?? null,
              action: outcome,
              by,
              requestId,
              at: new Date(now).toISOString(),
            });
          }
          acted.set(secret, done);
        }),
      );
      return reports.map((report) => acted.get(report.secret) ?? []);
    },
  };
}

const hexBytes = (hex: string): Uint8Array => Buffer.from(hex, 'hex');
