// Crash and restart under load: is every acknowledged write still there after a SIGKILL?
//   flock /tmp/keygate-load.lock bun scripts/crash-test.ts [--cycles 25] [--workers 24] [--max-seconds 300]
// Each cycle starts dist/keygate on the same database, drives concurrent creates (both schemes),
// deletes (both schemes) and authenticated calls, SIGKILLs it at a random moment, and then checks,
// after the next start has recovered the WAL:
//  - every 201'd create is in the database with the hash of the secret it returned (read-only
//    connection), and a sample of them still authenticate over HTTP (a child key is created with
//    the key and deleted again, so the check leaves no trace);
//  - every 204'd delete stays deleted;
//  - PRAGMA integrity_check answers ok.
// Requests whose answer never arrived may have landed either way and are not judged.
import { Database } from 'bun:sqlite';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { hashSecret } from '../src/auth/secrets';
import {
  flag,
  jwt,
  killHard,
  type RunningKeygate,
  round,
  spawnKeygate,
  startKeygate,
  tempDir,
} from './support/server';

const cycles = flag('cycles', 25);
const workers = flag('workers', 24);
const maxSeconds = flag('max-seconds', 300);
const HTTP_SAMPLE = 40;

type Acked = { key: string; secret: string; userId: number };
type Answer = { apikey: { key: string; secret: string }; error: string };

const dir = tempDir('crash');
const databaseUrl = join(dir, 'keygate.db');
const live = new Map<string, Acked>(); // acknowledged created, not acknowledged deleted
const deleted = new Set<string>(); // acknowledged deleted
const inDoubt = new Set<string>(); // a delete was sent, its answer never came
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
      live.set(answer.apikey.key, { key: answer.apikey.key, secret: answer.apikey.secret, userId });
      totals.created++;
    }
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

function verifyDatabase(cycle: number): void {
  const db = new Database(databaseUrl, { readonly: true });
  try {
    const integrity = (db.query('PRAGMA integrity_check').all() as Array<{ integrity_check: string }>).map(
      (r) => r.integrity_check,
    );
    if (integrity.join() !== 'ok')
      problems.push(`cycle ${cycle}: integrity_check: ${integrity.join('; ').slice(0, 300)}`);
    const find = db.query('SELECT secret_hash AS hash FROM api_keys WHERE id = ?');
    let lost = 0;
    for (const k of live.values()) {
      const row = find.get(k.key) as { hash: Uint8Array } | null;
      if (!row || !Buffer.from(row.hash).equals(hashSecret(k.secret))) lost++;
    }
    let resurrected = 0;
    for (const id of deleted) if (find.get(id)) resurrected++;
    if (lost > 0) problems.push(`cycle ${cycle}: ${lost} acknowledged creates lost`);
    if (resurrected > 0) problems.push(`cycle ${cycle}: ${resurrected} acknowledged deletes came back`);
    lostCreates += lost;
    resurrectedDeletes += resurrected;
  } finally {
    db.close();
  }
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
}

let lostCreates = 0;
let resurrectedDeletes = 0;
let httpVerified = 0;
let killedDuringStart = 0;
const started = performance.now();
const deadline = started + maxSeconds * 1000;
let cycle = 0;
let server = await startKeygate({ databaseUrl, env: { MAX_KEYS_PER_USER: '1000000' } });
try {
  for (cycle = 1; cycle <= cycles && performance.now() < deadline; cycle++) {
    const killAfter = 100 + Math.random() * 1400;
    const killAt = performance.now() + killAfter;
    const killer = Bun.sleep(killAfter).then(() => killHard(server));
    await load(server, () => performance.now() > killAt + 2000);
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
    server = await startKeygate({ databaseUrl, env: { MAX_KEYS_PER_USER: '1000000' } });
    verifyDatabase(cycle);
    await verifyOverHttp(server, cycle);
    console.log(
      `cycle ${cycle}: killed after ${Math.round(killAfter)} ms; ${live.size} live, ${deleted.size} deleted acknowledged; lost so far ${lostCreates}, resurrected ${resurrectedDeletes}`,
    );
  }
} finally {
  await killHard(server);
}
cycle--;
verifyDatabase(cycle);
const report = {
  cycles: cycle,
  seconds: round((performance.now() - started) / 1000, 1),
  requests: totals.requests,
  acknowledgedCreates: totals.created,
  acknowledgedDeletes: totals.deleted,
  authenticatedCalls: totals.authChecks,
  keysVerifiedInDatabaseLastCycle: live.size,
  keysVerifiedOverHttp: httpVerified,
  lostCreates,
  resurrectedDeletes,
  unexpectedStatuses: totals.unexpected,
  startupKills: killedDuringStart,
  problems,
};
console.log(JSON.stringify(report, null, 2));
rmSync(dir, { recursive: true, force: true });
process.exit(
  lostCreates === 0 && resurrectedDeletes === 0 && problems.length === 0 && cycle >= Math.min(cycles, 20)
    ? 0
    : 1,
);
