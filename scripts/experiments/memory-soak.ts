// Memory under mixed traffic with many keys stored: keygate's RSS per minute.
//   bun run build && flock /work/load.lock bun scripts/experiments/memory-soak.ts \
//     [--seed 1000000] [--limited 100000] [--minutes 10] [--concurrency 32]
// Seeds `seed` keys straight into SQLite before the server starts; the first `limited` of them have a
// rate limit (1000 per 60 s) and credits (1,000,000,000, no refill), so the traffic stays VALID and
// the limiter and the credits take run on every verification of them. Then, closed loop with
// `concurrency` requests in flight: 90 % verify (half of them on limited keys, half spread over a
// sample of the others), 9 % forward-auth (the same spread), 1 % create/update/delete through JWTs.
// Reports, per minute, the requests by operation, the verify codes, the errors (an unexpected status or
// a transport error) and the server's RSS and peak RSS (VmHWM) from /proc.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { seedKeys } from '../../bench/seed';
import { flag, jwt, round, startKeygate, stopGracefully, tempDir } from './support/server';

const seeded = flag('seed', 1_000_000);
const limited = Math.min(seeded, flag('limited', 100_000));
const minutes = flag('minutes', 10);
const concurrency = flag('concurrency', 32);

const USERS = 10_000;
/** One seeded key in this many of the unlimited ones is kept for the traffic (their secrets cost memory here). */
const UNLIMITED_SAMPLE = 5;
const RATELIMIT = { limit: 1000, duration: 60 };
const CREDITS = 1_000_000_000;

type Key = { key: string; secret: string; userId: number };

const dir = tempDir('memory-soak');
const databaseUrl = join(dir, 'keygate.db');
const limitedKeys: Key[] = [];
const otherKeys: Key[] = [];
const seedStarted = performance.now();
const userOf = (i: number) => i % USERS;
seedKeys(databaseUrl, [
  {
    count: limited,
    userOf,
    level: 0,
    expiresAt: Date.now() + 30 * 86_400_000,
    name: 'limited',
    ratelimit: RATELIMIT,
    credits: CREDITS,
    onKey: (key, secret, i) => limitedKeys.push({ key, secret, userId: userOf(i) }),
  },
  {
    count: seeded - limited,
    userOf: (i) => userOf(i + limited),
    level: 0,
    expiresAt: Date.now() + 30 * 86_400_000,
    name: 'seeded',
    onKey: (key, secret, i) => {
      if (i % UNLIMITED_SAMPLE === 0) otherKeys.push({ key, secret, userId: userOf(i + limited) });
    },
  },
]);
console.log(
  `seeded ${seeded} keys (${limited} limited and credited) in ${round((performance.now() - seedStarted) / 1000, 1)} s`,
);

const server = await startKeygate({ databaseUrl });
const base = server.base;

function memory(): { rssMiB: number; peakMiB: number } {
  const status = readFileSync(`/proc/${server.pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? Number.NaN);
  return { rssMiB: round(kib('VmRSS') / 1024, 1), peakMiB: round(kib('VmHWM') / 1024, 1) };
}

const tokens = new Map<number, string>();
async function bearer(userId: number): Promise<Record<string, string>> {
  let token = tokens.get(userId);
  if (!token) {
    token = await jwt.sign({ sub: userId, ttlSeconds: 86_400 });
    tokens.set(userId, token);
  }
  return { authorization: `Bearer ${token}` };
}
const json = { 'content-type': 'application/json' };
const basic = (k: Key) => ({
  authorization: `Basic ${Buffer.from(`${k.key}:${k.secret}`).toString('base64')}`,
});
const pick = <T>(list: T[]): T => list[Math.floor(Math.random() * list.length)] as T;
const trafficKey = () =>
  Math.random() < 0.5 && limitedKeys.length > 0 ? pick(limitedKeys) : pick(otherKeys);

/** Keys created during the run, which the updates and deletes act on. */
const created: Key[] = [];
let sequence = 0;

type Tally = {
  requests: number;
  byOp: Record<string, number>;
  codes: Record<string, number>;
  /** Verify answers that carried both a rate limit and credits. */
  limitedAndCredited: number;
  errors: number;
};
const newTally = (): Tally => ({ requests: 0, byOp: {}, codes: {}, limitedAndCredited: 0, errors: 0 });
let tally = newTally();
const errorSamples: string[] = [];

function count(op: string, ok: boolean, detail?: string): void {
  tally.requests++;
  tally.byOp[op] = (tally.byOp[op] ?? 0) + 1;
  if (!ok) {
    tally.errors++;
    if (errorSamples.length < 10 && detail) errorSamples.push(detail);
  }
}

async function send(
  op: string,
  expected: number[],
  request: () => Promise<Response>,
): Promise<Response | undefined> {
  try {
    const response = await request();
    const ok = expected.includes(response.status);
    count(op, ok, ok ? undefined : `${op} answered ${response.status}: ${await response.text()}`);
    return ok ? response : undefined;
  } catch (error) {
    count(op, false, `${op}: ${(error as Error).message}`);
    return undefined;
  }
}

async function verify(): Promise<void> {
  const k = trafficKey();
  const response = await send('verify', [200], () =>
    fetch(`${base}/apikeys/verify`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ key: k.key, secret: k.secret }),
    }),
  );
  if (!response) return;
  const answer = (await response.json()) as { code: string; ratelimit?: unknown; credits?: unknown };
  tally.codes[answer.code] = (tally.codes[answer.code] ?? 0) + 1;
  if (answer.ratelimit && answer.credits) tally.limitedAndCredited++;
}

async function forwardAuth(): Promise<void> {
  const response = await send('forward-auth', [200, 429], () =>
    fetch(`${base}/forward-auth`, { headers: basic(trafficKey()) }),
  );
  await response?.arrayBuffer();
}

async function write(roll: number): Promise<void> {
  if (roll < 0.4 || created.length === 0) {
    const userId = Math.floor(Math.random() * 200);
    const headers = { ...json, ...(await bearer(userId)) };
    const response = await send('create', [201], () =>
      fetch(`${base}/apikeys/jwt`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: `memory soak ${sequence++}`, level: 0, expiresIn: 3600 }),
      }),
    );
    if (!response) return;
    const { apikey } = (await response.json()) as { apikey: { key: string; secret: string } };
    created.push({ key: apikey.key, secret: apikey.secret, userId });
    return;
  }
  if (roll < 0.7) {
    // Updates touch seeded keys too (limited ones included), so cached keys are dropped and read again.
    const k = Math.random() < 0.5 ? pick(created) : trafficKey();
    const headers = { ...json, ...(await bearer(k.userId)) };
    const response = await send('update', [200], () =>
      fetch(`${base}/apikeys/${k.key}/jwt`, {
        method: 'PATCH',
        headers,
        body: JSON.stringify({ meta: { soak: sequence++ } }),
      }),
    );
    await response?.arrayBuffer();
    return;
  }
  const victim = created.splice(Math.floor(Math.random() * created.length), 1)[0] as Key;
  const headers = await bearer(victim.userId);
  const response = await send('delete', [204], () =>
    fetch(`${base}/apikeys/${victim.key}/jwt`, { method: 'DELETE', headers }),
  );
  await response?.arrayBuffer();
}

function next(): Promise<void> {
  const roll = Math.random();
  if (roll < 0.9) return verify();
  if (roll < 0.99) return forwardAuth();
  return write((roll - 0.99) * 100);
}

const atStart = memory();
console.log(JSON.stringify({ minute: 0, ...atStart }));
const report: Array<Tally & { minute: number; rssMiB: number; peakMiB: number }> = [];
const started = performance.now();
const until = started + minutes * 60_000;
let minuteEnds = started + 60_000;
const ticker = setInterval(() => {
  if (performance.now() < minuteEnds) return;
  minuteEnds += 60_000;
  const row = { minute: report.length + 1, ...tally, ...memory() };
  report.push(row);
  console.log(JSON.stringify(row));
  tally = newTally();
}, 200);

await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (performance.now() < until) await next();
  }),
);
clearInterval(ticker);
// The last minute (or a shorter run's only part of one) closes once its last answers are counted.
if (report.length < Math.ceil(minutes)) {
  const row = { minute: report.length + 1, ...tally, ...memory() };
  report.push(row);
  console.log(JSON.stringify(row));
}

const exit = await stopGracefully(server);
rmSync(dir, { recursive: true, force: true });
const summary = {
  seeded,
  limited,
  minutes: report.length,
  concurrency,
  requests: report.reduce((n, m) => n + m.requests, 0),
  errors: report.reduce((n, m) => n + m.errors, 0),
  errorSamples,
  rssAtStartMiB: atStart.rssMiB,
  rssPerMinuteMiB: report.map((m) => m.rssMiB),
  peakRssMiB: report.at(-1)?.peakMiB ?? Number.NaN,
  gracefulStopExitCode: exit,
};
console.log(JSON.stringify(summary, null, 2));
process.exit(summary.errors === 0 && exit === 0 ? 0 : 1);
