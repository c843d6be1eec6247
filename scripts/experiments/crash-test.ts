// Crash and restart under load: is every acknowledged write still there after a SIGKILL?
//   flock /tmp/keygate-load.lock bun scripts/experiments/crash-test.ts [--cycles 25] [--workers 24]
//     [--spenders 8] [--max-seconds 300] [--engine sqlite|postgres]
// Each cycle starts dist/keygate on the same database (a SQLite file, or a throwaway PostgreSQL
// server that is never killed itself), drives concurrent creates (both schemes),
// deletes (both schemes), rotations (both schemes; grace period 0, none given, 2 s or an hour) and
// authenticated calls, SIGKILLs it at a random moment, and then checks, after the next start has
// recovered the WAL:
//  - every 201'd create is in the database with the hash of the secret it returned (read-only
//    connection), and a sample of them still authenticate over HTTP (a child key is created with
//    the key and deleted again, so the check leaves no trace);
//  - every 204'd delete stays deleted;
//  - every 201'd rotation holds: the new key is there (and, sampled, authenticates); the old key is
//    gone or expired by the answer's time (grace 0), or is there with exactly the answer's new expiry
//    and, sampled, authenticates before it and not after it;
//  - a rotation whose answer never came is whole or absent: either the old key at its original
//    expiry and no new key, or exactly one new key (same name, user, level, expiry) and the old key
//    gone or shortened. Both keys at their original expiry, or neither key, is a half-rotation;
//  - PRAGMA integrity_check answers ok (SQLite);
//  - keys with credits, verified concurrently by `--spenders` workers, never gave more VALID answers
//    than the credits they lost, and lost no more than those plus the verifications in flight; keys
//    updated over and over (name, ratelimit and credits in one PATCH) are seen whole, never half
//    (support/crash-credits.ts).
// Creates and deletes whose answer never arrived may have landed either way and are not judged.
import { hashSecret } from '../../src/apikeys/secrets';
import { crashCredits } from './support/crash-credits';
import { crashDatabase, type Snapshot } from './support/crash-database';
import {
  flag,
  jwt,
  killHard,
  type RunningKeygate,
  round,
  spawnKeygate,
  startKeygate,
} from './support/server';

const cycles = flag('cycles', 25);
const workers = flag('workers', 24);
const maxSeconds = flag('max-seconds', 300);
const spenders = flag('spenders', 8);
const engineAt = process.argv.indexOf('--engine');
const engine = engineAt === -1 ? 'sqlite' : process.argv[engineAt + 1];
if (engine !== 'sqlite' && engine !== 'postgres') throw new Error('--engine is sqlite or postgres');
const HTTP_SAMPLE = 40;

type Acked = { key: string; secret: string; userId: number; name: string; level: number; expiresAt: number };
type Answer = {
  apikey: { key: string; secret: string; name: string; level: number; userId: number; expiresAt: string };
  previous?: { key: string; expiresAt: string };
  error: string;
};
/** An old key that kept a grace period: it authenticates until `graceUntil`, then never again. */
type Graced = Acked & { graceUntil: number };
/** A rotation sent, its answer not (yet) received; judged after the restart if it never came. */
type PendingRotation = { old: Acked };

const database = await crashDatabase(engine);
const databaseUrl = database.url;
const credits = crashCredits();
const live = new Map<string, Acked>(); // acknowledged created, not acknowledged deleted
const deleted = new Set<string>(); // acknowledged deleted
const inDoubt = new Set<string>(); // a delete was sent, its answer never came
const graced = new Map<string, Graced>(); // rotated out with a grace period (acknowledged)
const rotatedAway = new Map<string, Acked & { answeredAt: number }>(); // rotated out with grace 0
const pendingRotations = new Set<PendingRotation>();
const rotation = { acknowledged: 0, withGrace: 0, inDoubtApplied: 0, inDoubtNotApplied: 0, halfRotations: 0 };
const totals = { requests: 0, created: 0, deleted: 0, authChecks: 0, transportErrors: 0, unexpected: 0 };
const problems: string[] = [];
const USERS = 50;
const tokens = new Map<number, string>();
for (let user = 1; user <= USERS; user++) tokens.set(user, await jwt.sign({ sub: user, ttlSeconds: 86_400 }));

const pick = <T>(items: T[]): T | undefined => items[Math.floor(Math.random() * items.length)];
const bearer = (userId: number) => ({ authorization: `Bearer ${tokens.get(userId)}` });
const basic = (k: Acked) => ({
  authorization: `Basic ${Buffer.from(`${k.key}:${k.secret}`).toString('base64')}`,
});
const json = { 'content-type': 'application/json' };
const body = () => JSON.stringify({ name: `crash-${totals.requests}`, level: 0, expiresIn: 86_400 });

async function call(
  server: RunningKeygate,
  method: string,
  path: string,
  headers: Record<string, string>,
  payload?: string,
) {
  totals.requests++;
  return fetch(`${server.base}${path}`, { method, headers, body: payload });
}

function expectStatus(what: string, status: number, allowed: number[]) {
  if (!allowed.includes(status)) {
    totals.unexpected++;
    if (problems.length < 20) problems.push(`${what} answered ${status}`);
  }
}

/** One random operation; throws on a transport error (the server has been killed). */
async function operate(server: RunningKeygate): Promise<void> {
  const roll = Math.random();
  const keys = [...live.values()];
  if (roll < 0.45 || keys.length < 20) {
    const viaKey = roll < 0.15 && keys.length > 0;
    const parent = viaKey ? (pick(keys) as Acked) : undefined;
    const userId = parent?.userId ?? 1 + Math.floor(Math.random() * USERS);
    const response = await call(
      server,
      'POST',
      `/apikeys/${parent ? 'key' : 'jwt'}`,
      { ...json, ...(parent ? basic(parent) : bearer(userId)) },
      body(),
    );
    const answer = (await response.json()) as Answer;
    // A parent key can be deleted by a concurrent worker between pick and answer: 403 is fine then.
    expectStatus('create', response.status, parent ? [201, 403] : [201]);
    if (response.status === 201) {
      live.set(answer.apikey.key, ackedOf(answer));
      totals.created++;
    }
  } else if (roll < 0.58) {
    await rotate(server, pick(keys) as Acked);
  } else if (roll < 0.8) {
    const victim = pick(keys) as Acked;
    live.delete(victim.key); // no longer ours to use; its fate is decided by the answer
    inDoubt.add(victim.key);
    const viaKey = Math.random() < 0.5;
    const self = viaKey && Math.random() < 0.5;
    const sibling =
      viaKey && !self ? keys.find((k) => k.userId === victim.userId && k.key !== victim.key) : undefined;
    const headers = self ? basic(victim) : sibling ? basic(sibling) : bearer(victim.userId);
    const response = await call(
      server,
      'DELETE',
      `/apikeys/${victim.key}/${self || sibling ? 'key' : 'jwt'}`,
      headers,
    );
    await response.arrayBuffer();
    inDoubt.delete(victim.key);
    expectStatus('delete', response.status, sibling ? [204, 403] : [204]);
    if (response.status === 204) {
      deleted.add(victim.key);
      totals.deleted++;
    } else live.set(victim.key, victim);
  } else {
    // An authenticated call that changes nothing: a create with a level above the key's own is 403
    // only after the key and secret verified; an unknown secret would be 403 too, so check the text.
    const k = pick(keys) as Acked;
    const response = await call(
      server,
      'POST',
      '/apikeys/key',
      { ...json, ...basic(k) },
      JSON.stringify({ name: 'x', level: 8, expiresIn: 60 }),
    );
    const answer = (await response.json()) as Answer;
    totals.authChecks++;
    if (live.has(k.key)) {
      expectStatus('authenticated call', response.status, [403]);
      if (response.status === 403 && !String(answer.error).startsWith('You may create keys up to level')) {
        totals.unexpected++;
        problems.push(`a live key failed authentication: ${answer.error}`);
      }
    }
  }
}

const ackedOf = (answer: Answer): Acked => ({
  key: answer.apikey.key,
  secret: answer.apikey.secret,
  userId: answer.apikey.userId,
  name: answer.apikey.name,
  level: answer.apikey.level,
  expiresAt: Date.parse(answer.apikey.expiresAt),
});

const GRACE_CHOICES = [0, undefined, 2, 3600] as const; // seconds; undefined: an empty body (default 0)

/** Rotates `old` with its owner's token or with itself; throws on a transport error (killed). */
async function rotate(server: RunningKeygate, old: Acked): Promise<void> {
  live.delete(old.key); // no longer ours to use until the answer decides
  const pending: PendingRotation = { old };
  pendingRotations.add(pending);
  const grace = pick([...GRACE_CHOICES]);
  const viaKey = Math.random() < 0.5;
  const response = await call(
    server,
    'POST',
    `/apikeys/${old.key}/rotate/${viaKey ? 'key' : 'jwt'}`,
    { ...(grace === undefined ? {} : json), ...(viaKey ? basic(old) : bearer(old.userId)) },
    grace === undefined ? undefined : JSON.stringify({ gracePeriod: grace }),
  );
  const answer = (await response.json()) as Answer;
  const answeredAt = Date.now();
  pendingRotations.delete(pending);
  expectStatus('rotate', response.status, [201]);
  if (response.status !== 201) {
    live.set(old.key, old);
    return;
  }
  const renewed = ackedOf(answer);
  const previousExpiry = Date.parse(answer.previous?.expiresAt ?? '');
  const shape =
    answer.previous?.key === old.key &&
    renewed.expiresAt === old.expiresAt &&
    renewed.userId === old.userId &&
    renewed.level === old.level &&
    renewed.name === old.name &&
    previousExpiry <= old.expiresAt &&
    previousExpiry <= answeredAt + (grace ?? 0) * 1000;
  if (!shape) {
    totals.unexpected++;
    problems.push(`rotate answered an unexpected body: ${JSON.stringify({ ...answer, apikey: undefined })}`);
  }
  live.set(renewed.key, renewed);
  rotation.acknowledged++;
  if (grace) {
    rotation.withGrace++;
    graced.set(old.key, { ...old, graceUntil: previousExpiry });
  } else rotatedAway.set(old.key, { ...old, answeredAt });
}

async function load(server: RunningKeygate, until: () => boolean): Promise<void> {
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (!until()) {
        try {
          await operate(server);
        } catch {
          totals.transportErrors++;
          return; // killed
        }
      }
    }),
  );
}

async function verifyDatabase(cycle: number): Promise<Snapshot> {
  const stored = await database.snapshot();
  const integrity = stored.integrity ?? ['ok'];
  if (integrity.join() !== 'ok')
    problems.push(`cycle ${cycle}: integrity_check: ${integrity.join('; ').slice(0, 300)}`);
  let lost = 0;
  for (const k of live.values()) {
    const row = stored.keys.get(k.key);
    if (!row || row.hash !== hashSecret(k.secret).toString('hex')) lost++;
  }
  let resurrected = 0;
  for (const id of deleted) if (stored.keys.has(id)) resurrected++;
  verifyRotations(stored, cycle);
  if (lost > 0) problems.push(`cycle ${cycle}: ${lost} acknowledged creates lost`);
  if (resurrected > 0) problems.push(`cycle ${cycle}: ${resurrected} acknowledged deletes came back`);
  lostCreates += lost;
  resurrectedDeletes += resurrected;
  return stored;
}

/** Acknowledged rotations hold; a rotation left in doubt by the kill is whole or absent. */
function verifyRotations(stored: Snapshot, cycle: number): void {
  const row = (id: string) => stored.keys.get(id) ?? null;
  const sameName = (name: string) =>
    [...stored.keys].filter(([, k]) => k.name === name).map(([id, k]) => ({ id, ...k }));
  for (const old of graced.values()) {
    const found = row(old.key);
    // Once its grace has passed, the purge may have removed it.
    const intact = found
      ? found.expiresAt === old.graceUntil && found.hash === hashSecret(old.secret).toString('hex')
      : old.graceUntil <= Date.now();
    if (!intact) {
      brokenRotations++;
      problems.push(`cycle ${cycle}: a rotated-out key lost its acknowledged grace expiry`);
    }
  }
  for (const old of rotatedAway.values()) {
    const found = row(old.key);
    if (found && found.expiresAt > old.answeredAt) {
      brokenRotations++;
      problems.push(`cycle ${cycle}: a key rotated with grace 0 is still live`);
    }
  }
  const known = (id: string) =>
    live.has(id) || graced.has(id) || rotatedAway.has(id) || deleted.has(id) || inDoubt.has(id);
  for (const pending of pendingRotations) {
    const { old } = pending;
    const found = row(old.key);
    const renewed = sameName(old.name).filter((r) => r.id !== old.key && !known(r.id));
    const oldUntouched = found !== null && found.expiresAt === old.expiresAt;
    const oldShortened = found === null || found.expiresAt < old.expiresAt;
    const whole =
      renewed.length === 1 &&
      renewed[0]?.userId === old.userId &&
      renewed[0]?.level === old.level &&
      renewed[0]?.expiresAt === old.expiresAt;
    if (oldUntouched && renewed.length === 0) {
      rotation.inDoubtNotApplied++;
      live.set(old.key, old); // never happened: the key is ours again
    } else if (oldShortened && whole) {
      rotation.inDoubtApplied++; // happened; its new secret never reached us, so both leave the model
    } else {
      rotation.halfRotations++;
      problems.push(
        `cycle ${cycle}: half-rotation of a key: old ${found ? `expiry ${found.expiresAt} (was ${old.expiresAt})` : 'gone'}, ${renewed.length} new`,
      );
    }
  }
  pendingRotations.clear();
}

/** Authenticates a sample of acknowledged keys over HTTP without changing the database in the end. */
async function verifyOverHttp(server: RunningKeygate, cycle: number): Promise<void> {
  const sample = [...live.values()].sort(() => Math.random() - 0.5).slice(0, HTTP_SAMPLE);
  for (const k of sample) {
    const created = await call(server, 'POST', '/apikeys/key', { ...json, ...basic(k) }, body());
    if (created.status !== 201) {
      lostCreates++;
      problems.push(
        `cycle ${cycle}: acknowledged key does not authenticate after restart (${created.status})`,
      );
      continue;
    }
    const child = ((await created.json()) as Answer).apikey.key;
    const removed = await call(server, 'DELETE', `/apikeys/${child}/key`, basic(k));
    if (removed.status !== 204)
      problems.push(`cycle ${cycle}: could not delete the probe key (${removed.status})`);
    httpVerified++;
  }
  // Rotated-out keys: a grace-period key authenticates before its new expiry and never after; a
  // grace-0 key never. Keys within half a second of their expiry are not judged (clock edges).
  const rotatedOut = [
    ...[...graced.values()].map((k) => ({ k, until: k.graceUntil })),
    ...[...rotatedAway.values()].map((k) => ({ k, until: 0 })),
  ]
    .sort(() => Math.random() - 0.5)
    .slice(0, HTTP_SAMPLE);
  for (const { k, until } of rotatedOut) {
    const now = Date.now();
    if (Math.abs(until - now) < 500) continue;
    const shouldAuthenticate = until > now;
    const probe = await call(
      server,
      'POST',
      '/apikeys/key',
      { ...json, ...basic(k) },
      JSON.stringify({ name: 'x', level: 8, expiresIn: 60 }),
    );
    const answer = (await probe.json()) as Answer;
    // A rotated-out key that authenticates is retiring, and a create with it is refused for that
    // (403 "This key was rotated and is retiring"); one that does not is refused as unknown.
    const authenticated =
      probe.status === 403 &&
      (String(answer.error).startsWith('This key was rotated and is retiring') ||
        String(answer.error).startsWith('You may create keys up to level'));
    if (authenticated !== shouldAuthenticate) {
      brokenRotations++;
      problems.push(
        `cycle ${cycle}: a rotated-out key ${authenticated ? 'authenticates' : 'fails'} ${shouldAuthenticate ? 'before' : 'after'} its expiry (${probe.status})`,
      );
    }
    rotatedOutVerified++;
  }
}

let lostCreates = 0;
let resurrectedDeletes = 0;
let brokenRotations = 0;
let rotatedOutVerified = 0;
let httpVerified = 0;
let killedDuringStart = 0;
const started = performance.now();
const deadline = started + maxSeconds * 1000;
let cycle = 0;
const env = { MAX_KEYS_PER_USER: '1000000' };
let server = await startKeygate({ databaseUrl, env });
try {
  await credits.setUp(server);
  for (cycle = 1; cycle <= cycles && performance.now() < deadline; cycle++) {
    const killAfter = 100 + Math.random() * 1400;
    const killAt = performance.now() + killAfter;
    const killer = Bun.sleep(killAfter).then(() => killHard(server));
    const until = () => performance.now() > killAt + 2000;
    await Promise.all([load(server, until), credits.load(server, until, spenders)]);
    await killer;
    // Every few cycles, also kill a start-up in the middle (opening, WAL recovery, migrations).
    if (cycle % 5 === 0) {
      const victim = spawnKeygate({ databaseUrl });
      await Bun.sleep(Math.random() * 40);
      const wasReady = await Promise.race([
        victim.ready.then(
          () => true,
          () => true,
        ),
        Bun.sleep(0).then(() => false),
      ]);
      if (!wasReady) killedDuringStart++;
      await killHard(victim.running);
      await victim.ready.catch(() => undefined);
    }
    server = await startKeygate({ databaseUrl, env });
    credits.check(cycle, await verifyDatabase(cycle));
    await credits.checkKeyInfo(server, cycle);
    await verifyOverHttp(server, cycle);
    await credits.topUp(server);
    const c = credits.totals;
    console.log(
      `cycle ${cycle}: killed after ${Math.round(killAfter)} ms; ${live.size} live, ${deleted.size} deleted, ${rotation.acknowledged} rotated acknowledged; lost so far ${lostCreates}, resurrected ${resurrectedDeletes}, broken rotations ${brokenRotations + rotation.halfRotations}; credits granted ${c.granted}, VALID ${c.validAnswers} taking ${c.validCost}, taken unanswered ${c.takenUnanswered}, stranded ${c.stranded}, updates ${c.updatesAcknowledged} (half ${c.halfUpdates})`,
    );
  }
} catch (error) {
  await killHard(server);
  await database.destroy();
  throw error;
}
await killHard(server);
cycle--;
await verifyDatabase(cycle);
const report = {
  engine,
  cycles: cycle,
  seconds: round((performance.now() - started) / 1000, 1),
  requests: totals.requests,
  acknowledgedCreates: totals.created,
  acknowledgedDeletes: totals.deleted,
  acknowledgedRotations: rotation.acknowledged,
  acknowledgedRotationsWithGrace: rotation.withGrace,
  rotationsInDoubtFoundApplied: rotation.inDoubtApplied,
  rotationsInDoubtFoundNotApplied: rotation.inDoubtNotApplied,
  halfRotations: rotation.halfRotations,
  brokenRotations,
  rotatedOutKeysCheckedOverHttp: rotatedOutVerified,
  authenticatedCalls: totals.authChecks,
  keysVerifiedInDatabaseLastCycle: live.size,
  keysVerifiedOverHttp: httpVerified,
  lostCreates,
  resurrectedDeletes,
  unexpectedStatuses: totals.unexpected,
  startupKills: killedDuringStart,
  problems,
  credits: credits.totals,
  creditProblems: credits.problems,
};
console.log(JSON.stringify(report, null, 2));
await database.destroy();
process.exit(
  !credits.failed() &&
    lostCreates === 0 &&
    resurrectedDeletes === 0 &&
    brokenRotations === 0 &&
    rotation.halfRotations === 0 &&
    problems.length === 0 &&
    cycle >= Math.min(cycles, 20)
    ? 0
    : 1,
);
