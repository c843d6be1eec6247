// The crash test's credits and updates: keys with credits verified concurrently (verify with a cost of
// 1 to 3, and forward-auth, which takes 1), and keys updated over and over with a name, a ratelimit and
// credits that belong together. After every kill -9 and restart, from the database:
//  - the credits a key lost since the load began are at least what its acknowledged VALID answers
//    took (no answer ever granted more than the credits held), and at most that plus the costs of the
//    verifications whose answers never came (nothing else is stranded);
//  - an update is seen whole or not at all: name, ratelimit and credits all from one PATCH, which is
//    the last one acknowledged or the one in flight when the process died; key info over HTTP agrees.
// These keys belong to users of their own, so the rest of the crash test never picks them.
import type { Snapshot } from './crash-database';
import { jwt, type RunningKeygate } from './server';

type CreditKey = {
  key: string;
  secret: string;
  /** remaining when the current load began (read from the database). */
  before: number;
  /** Costs of the VALID answers received since then. */
  acknowledged: number;
  /** Costs of the verifications sent and not yet answered. */
  pending: number;
};

type UpdatedKey = {
  key: string;
  userId: number;
  /** The last acknowledged update's number (0: as created). */
  acknowledged: number;
  /** The update sent and not yet answered, if any. */
  inFlight: number | undefined;
};

const GRANT = 150;
/** Below this many remaining, a key is granted GRANT again between cycles. */
const TOP_UP_BELOW = 20;
const FIRST_USER = 900_001;

/** What update `n` sets: every field says `n`, so a mix of two updates shows. */
const settingsOf = (n: number) => ({
  name: `updated-${n}`,
  ratelimit: { limit: 1000 + n, duration: 3600 },
  credits: { remaining: 5000 + n },
});

export function crashCredits({ creditKeys = 6, updatedKeys = 4 } = {}) {
  const spent: CreditKey[] = [];
  const updated: UpdatedKey[] = [];
  const tokens = new Map<number, string>();
  const totals = {
    granted: 0,
    validAnswers: 0,
    validCost: 0,
    exceededAnswers: 0,
    takenInDatabase: 0,
    /** Taken by verifications whose answer died with the process. */
    takenUnanswered: 0,
    /** Taken beyond every verification in flight: credits a crash stranded. */
    stranded: 0,
    overgranted: 0,
    updatesAcknowledged: 0,
    updatesInDoubtApplied: 0,
    updatesInDoubtNotApplied: 0,
    halfUpdates: 0,
    lostUpdates: 0,
    unexpected: 0,
  };
  const problems: string[] = [];
  const problem = (text: string) => {
    if (problems.length < 20) problems.push(text);
  };

  const bearer = async (userId: number) => {
    let token = tokens.get(userId);
    if (token === undefined) {
      token = await jwt.sign({ sub: userId, ttlSeconds: 86_400 });
      tokens.set(userId, token);
    }
    return { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  };

  const create = async (server: RunningKeygate, userId: number, settings: Record<string, unknown>) => {
    const response = await fetch(`${server.base}/apikeys/jwt`, {
      method: 'POST',
      headers: await bearer(userId),
      body: JSON.stringify({ name: 'credits', level: 0, expiresIn: 86_400, ...settings }),
    });
    const answer = (await response.json()) as { apikey: { key: string; secret: string } };
    if (response.status !== 201) throw new Error(`could not create a key with credits (${response.status})`);
    return answer.apikey;
  };

  /** One verification of `k`; throws on a transport error (the server has been killed). */
  async function spend(server: RunningKeygate, k: CreditKey): Promise<void> {
    const viaForwardAuth = Math.random() < 0.3;
    const cost = viaForwardAuth ? 1 : 1 + Math.floor(Math.random() * 3);
    k.pending += cost;
    const response = viaForwardAuth
      ? await fetch(`${server.base}/forward-auth`, {
          headers: { 'x-api-key': k.key, 'x-api-secret': k.secret },
        })
      : await fetch(`${server.base}/apikeys/verify`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ key: k.key, secret: k.secret, cost }),
        });
    const text = await response.text();
    k.pending -= cost;
    const code = viaForwardAuth
      ? response.status === 200
        ? 'VALID'
        : response.headers.get('x-keygate-code')
      : response.status === 200
        ? (JSON.parse(text) as { code: string }).code
        : `HTTP ${response.status}`;
    if (code === 'VALID') {
      k.acknowledged += cost;
      totals.validAnswers++;
      totals.validCost += cost;
    } else if (code === 'USAGE_EXCEEDED') totals.exceededAnswers++;
    else {
      totals.unexpected++;
      problem(`a verification of a key with credits answered ${code}`);
    }
  }

  /** The next update of `k`; throws on a transport error. */
  async function update(server: RunningKeygate, k: UpdatedKey): Promise<void> {
    const n = k.acknowledged + 1;
    k.inFlight = n;
    const response = await fetch(`${server.base}/apikeys/${k.key}/jwt`, {
      method: 'PATCH',
      headers: await bearer(k.userId),
      body: JSON.stringify(settingsOf(n)),
    });
    await response.arrayBuffer();
    k.inFlight = undefined;
    if (response.status === 200) {
      k.acknowledged = n;
      totals.updatesAcknowledged++;
    } else {
      totals.unexpected++;
      problem(`an update answered ${response.status}`);
    }
  }

  const loop = async (until: () => boolean, each: () => Promise<void>) => {
    while (!until()) {
      try {
        await each();
      } catch {
        return; // killed
      }
    }
  };

  return {
    totals,
    problems,

    /** Makes the keys on the first server; `snapshot` then gives their starting credits. */
    async setUp(server: RunningKeygate): Promise<void> {
      for (let i = 0; i < creditKeys; i++) {
        // Half also have a rate limit far above the load, so the limiter runs on every verification.
        const ratelimit = i % 2 === 0 ? { ratelimit: { limit: 1_000_000, duration: 60 } } : {};
        const made = await create(server, FIRST_USER + i, { credits: { remaining: GRANT }, ...ratelimit });
        spent.push({ ...made, before: GRANT, acknowledged: 0, pending: 0 });
        totals.granted += GRANT;
      }
      for (let i = 0; i < updatedKeys; i++) {
        const userId = FIRST_USER + creditKeys + i;
        const made = await create(server, userId, settingsOf(0));
        updated.push({ key: made.key, userId, acknowledged: 0, inFlight: undefined });
      }
    },

    /** `spenders` workers verifying keys with credits and one worker per updated key, until `until`. */
    async load(server: RunningKeygate, until: () => boolean, spenders: number): Promise<void> {
      await Promise.all([
        ...Array.from({ length: spenders }, (_, i) =>
          loop(until, () => spend(server, spent[i % spent.length] as CreditKey)),
        ),
        ...updated.map((k) => loop(until, () => update(server, k))),
      ]);
    },

    /** Judges what the database holds after a restart (no load running); resets the per-load counts. */
    check(cycle: number, stored: Snapshot): void {
      for (const k of spent) {
        const after = stored.credits.get(k.key);
        if (after === undefined) {
          problem(`cycle ${cycle}: a key's credits are gone`);
          continue;
        }
        const taken = k.before - after;
        totals.takenInDatabase += taken;
        if (taken < k.acknowledged) {
          totals.overgranted += k.acknowledged - taken;
          problem(`cycle ${cycle}: VALID answers took ${k.acknowledged} credits, the database lost ${taken}`);
        }
        const unanswered = Math.min(Math.max(0, taken - k.acknowledged), k.pending);
        totals.takenUnanswered += unanswered;
        const stranded = taken - k.acknowledged - unanswered;
        if (stranded > 0) {
          totals.stranded += stranded;
          problem(`cycle ${cycle}: ${stranded} credits taken with no verification to show for them`);
        }
        k.before = after;
        k.acknowledged = 0;
        k.pending = 0;
      }
      for (const k of updated) {
        const row = stored.keys.get(k.key);
        const remaining = stored.credits.get(k.key);
        const n = Number(row?.name.slice('updated-'.length));
        const whole =
          row !== undefined &&
          Number.isInteger(n) &&
          row.ratelimitLimit === settingsOf(n).ratelimit.limit &&
          remaining === settingsOf(n).credits.remaining;
        if (!whole) {
          totals.halfUpdates++;
          problem(
            `cycle ${cycle}: an update half applied: ${JSON.stringify({ name: row?.name, limit: row?.ratelimitLimit, remaining })}`,
          );
        } else if (n === k.acknowledged) {
          if (k.inFlight !== undefined) totals.updatesInDoubtNotApplied++;
        } else if (n === k.inFlight) {
          totals.updatesInDoubtApplied++;
          k.acknowledged = n;
        } else {
          totals.lostUpdates++;
          problem(`cycle ${cycle}: update ${n} stored, ${k.acknowledged} acknowledged last`);
        }
        k.inFlight = undefined;
      }
    },

    /** Key info over HTTP shows each updated key whole, as the database has it. */
    async checkKeyInfo(server: RunningKeygate, cycle: number): Promise<void> {
      for (const k of updated) {
        const response = await fetch(`${server.base}/apikeys/${k.key}/jwt`, {
          headers: await bearer(k.userId),
        });
        const info = ((await response.json()) as { apikey?: Record<string, unknown> }).apikey;
        const expected = settingsOf(k.acknowledged);
        const shown = { name: info?.name, ratelimit: info?.ratelimit, credits: info?.credits };
        if (!Bun.deepEquals(shown, expected)) {
          totals.halfUpdates++;
          problem(`cycle ${cycle}: key info shows ${JSON.stringify(shown)}, not update ${k.acknowledged}`);
        }
      }
    },

    /** Grants GRANT again to keys running low, before the next load; `snapshot` must follow. */
    async topUp(server: RunningKeygate): Promise<void> {
      for (const [i, k] of spent.entries()) {
        if (k.before >= TOP_UP_BELOW) continue;
        const response = await fetch(`${server.base}/apikeys/${k.key}/jwt`, {
          method: 'PATCH',
          headers: await bearer(FIRST_USER + i),
          body: JSON.stringify({ credits: { remaining: GRANT } }),
        });
        await response.arrayBuffer();
        if (response.status !== 200) throw new Error(`could not grant credits again (${response.status})`);
        totals.granted += GRANT - k.before;
        k.before = GRANT;
      }
    },

    failed(): boolean {
      return (
        problems.length > 0 ||
        totals.overgranted > 0 ||
        totals.stranded > 0 ||
        totals.halfUpdates > 0 ||
        totals.lostUpdates > 0
      );
    },
  };
}
