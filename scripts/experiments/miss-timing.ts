// Do an unknown key and a known key with a wrong secret take the same time when nothing is cached?
// Starts keygate (from source, or the compiled binary with --binary) on 127.0.0.1 with
// KEY_CACHE_SECONDS=0, on SQLite or on a throwaway PostgreSQL (--engine postgres), creates a few keys,
// then sends the two kinds of request interleaved (A B, B A, …), one at a time over one keep-alive
// connection, on each of the three ways a key is authenticated: POST /apikeys/verify, /forward-auth
// and a /key endpoint. Every unknown id and every wrong secret is fresh; the wrong secrets go to the
// keys in turn, and each unknown id sorts next to the key of its turn. Prints each series' median
// and p90, the difference of the medians, and the Mann-Whitney z of "unknown key" against "wrong
// secret" (negative: the unknown key answers sooner; |z| < 3 is what equal timing looks like).
// Run under the load lock: flock /tmp/keygate-load.lock bun scripts/experiments/miss-timing.ts [--engine postgres]
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { generateKeyId, generateSecret } from '../../src/apikeys/secrets';
import { startPostgres, type ThrowawayPostgres } from '../../test/support/postgres';
import {
  flag,
  jwt,
  percentile,
  type RunningKeygate,
  round,
  startKeygate,
  stopGracefully,
  tempDir,
} from './support/server';

const requests = flag('requests', 5000);
const warmup = flag('warmup', 500);
const keyCount = flag('keys', 100);
const engine = process.argv.includes('--engine')
  ? process.argv[process.argv.indexOf('--engine') + 1]
  : 'sqlite';
if (engine !== 'sqlite' && engine !== 'postgres') throw new Error('--engine is sqlite or postgres');
const binaryAt = process.argv.indexOf('--binary');
const binary = binaryAt === -1 ? undefined : process.argv[binaryAt + 1];

type Credential = { key: string; secret: string };
type Route = {
  name: string;
  expected: number;
  send(base: string, credential: Credential): Promise<Response>;
};

const keyHeaders = ({ key, secret }: Credential) => ({ 'x-api-key': key, 'x-api-secret': secret });
const ROUTES: Route[] = [
  {
    name: 'POST /apikeys/verify',
    expected: 200,
    send: (base, credential) =>
      fetch(`${base}/apikeys/verify`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(credential),
      }),
  },
  {
    name: 'GET /forward-auth',
    expected: 403,
    send: (base, credential) => fetch(`${base}/forward-auth`, { headers: keyHeaders(credential) }),
  },
  {
    name: 'GET /apikeys/key',
    expected: 403,
    send: (base, credential) => fetch(`${base}/apikeys/key`, { headers: keyHeaders(credential) }),
  },
];

/** Mann-Whitney U of `a` against `b` as a z-score (normal approximation, corrected for ties). */
function mannWhitneyZ(a: number[], b: number[]): number {
  const all = [...a.map((value) => ({ value, fromA: true })), ...b.map((value) => ({ value, fromA: false }))];
  all.sort((x, y) => x.value - y.value);
  let rankSumA = 0;
  let tieTerm = 0;
  for (let i = 0; i < all.length; ) {
    let j = i;
    while (j < all.length && all[j]?.value === all[i]?.value) j++;
    const rank = (i + 1 + j) / 2;
    for (let k = i; k < j; k++) if (all[k]?.fromA) rankSumA += rank;
    const tied = j - i;
    tieTerm += tied ** 3 - tied;
    i = j;
  }
  const n1 = a.length;
  const n2 = b.length;
  const n = n1 + n2;
  const u = rankSumA - (n1 * (n1 + 1)) / 2;
  const sd = Math.sqrt(((n1 * n2) / 12) * (n + 1 - tieTerm / (n * (n - 1))));
  return (u - (n1 * n2) / 2) / sd;
}

let postgres: ThrowawayPostgres | undefined;
let keygate: RunningKeygate | undefined;
const dir = tempDir('miss-timing');
try {
  if (engine === 'postgres') postgres = await startPostgres();
  keygate = await startKeygate({
    databaseUrl: postgres?.url ?? join(dir, 'keygate.db'),
    env: { KEY_CACHE_SECONDS: '0', MAX_KEYS_PER_USER: String(keyCount + 10) },
    binary,
    fromSource: binary === undefined,
  });
  const base = keygate.base;
  const bearer = `Bearer ${await jwt.sign({ sub: 1, ttlSeconds: 3600 })}`;
  const known: string[] = [];
  for (let i = 0; i < keyCount; i++) {
    const created = await fetch(`${base}/apikeys/jwt`, {
      method: 'POST',
      headers: { authorization: bearer, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `timing ${i}`, level: 1, expiresIn: 3600 }),
    });
    if (created.status !== 201) throw new Error(`create answered ${created.status}: ${await created.text()}`);
    known.push(((await created.json()) as { apikey: { key: string } }).apikey.key);
  }

  // An unknown id next to a known one (the same creation-time prefix, a fresh random part), so the
  // two series read rows all over the table rather than the unknown ones always its newest row.
  const kinds = {
    'unknown key': (i: number): Credential => ({
      key: `${(known[i % known.length] as string).slice(0, 11)}${generateKeyId(0).slice(11)}`,
      secret: generateSecret(),
    }),
    'wrong secret': (i: number): Credential => ({
      key: known[i % known.length] as string,
      secret: generateSecret(),
    }),
  };

  const timeOne = async (route: Route, credential: Credential, bodies: Set<string>): Promise<number> => {
    const started = performance.now();
    const response = await route.send(base, credential);
    const text = await response.text();
    const micros = (performance.now() - started) * 1000;
    if (response.status !== route.expected) {
      throw new Error(`${route.name} answered ${response.status}: ${text}`);
    }
    bodies.add(`${response.status} ${text}`);
    return micros;
  };

  console.log(
    `cache-miss timing on ${engine}, KEY_CACHE_SECONDS=0, ${binary ?? 'bun src/cli.ts serve'}: ` +
      `${requests} requests per series after ${warmup} warm-up, sequential, one connection, ${keyCount} keys`,
  );
  for (const route of ROUTES) {
    const unknown: number[] = [];
    const wrong: number[] = [];
    const bodies = new Set<string>();
    for (let i = 0; i < warmup + requests; i++) {
      // A B, then B A: drift in the machine hits both series alike.
      const unknownFirst = i % 2 === 0;
      const first = unknownFirst ? kinds['unknown key'](i) : kinds['wrong secret'](i);
      const second = unknownFirst ? kinds['wrong secret'](i) : kinds['unknown key'](i);
      const a = await timeOne(route, first, bodies);
      const b = await timeOne(route, second, bodies);
      if (i < warmup) continue;
      unknown.push(unknownFirst ? a : b);
      wrong.push(unknownFirst ? b : a);
    }
    const sortedUnknown = [...unknown].sort((x, y) => x - y);
    const sortedWrong = [...wrong].sort((x, y) => x - y);
    const medianUnknown = percentile(sortedUnknown, 50);
    const medianWrong = percentile(sortedWrong, 50);
    console.log(`  ${route.name}`);
    console.log(
      `    unknown key   median ${round(medianUnknown, 1)} µs   p90 ${round(percentile(sortedUnknown, 90), 1)} µs`,
    );
    console.log(
      `    wrong secret  median ${round(medianWrong, 1)} µs   p90 ${round(percentile(sortedWrong, 90), 1)} µs`,
    );
    console.log(
      `    unknown − wrong: median ${round(medianUnknown - medianWrong, 1)} µs, ` +
        `Mann-Whitney z = ${round(mannWhitneyZ(unknown, wrong), 1)}; distinct answers: ${bodies.size}`,
    );
  }
} finally {
  if (keygate !== undefined) await stopGracefully(keygate);
  postgres?.destroy();
  rmSync(dir, { recursive: true, force: true });
}
