// The bench's cases: what each load sends, to which server, on which databases, and what it
// measures; and the fixtures they share (tokens, caller keys, keys to verify, seeded databases).
import { randomBytes } from 'node:crypto';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createJwtAuthority } from '../src/auth/jwt';
import { systemClock } from '../src/core/clock';
import type { Options } from './options';
import { seedKeys } from './seed';

export const DAY_MS = 86_400_000;
/** Expired keys in the purge measurement's database. */
export const PURGE_KEYS = 1_000_000;
// The purge's baseline runs with the largest interval config.ts accepts: its timer would first fire a
// day after keygate starts, and the baseline lasts as long as the purge run (at most 75 s).
export const NO_PURGE_INTERVAL_SECONDS = 86_400;
export const PEER_DIR = join(import.meta.dir, 'peer');
export const PEER_VERIFY_KEYS = 10_000;
const PEER_FEWER_KEYS = 1000;
export const PEER_PREPARE_MS = 20_000;
const UNCAPPED = '1000000000';
/** A rate limit no load here reaches (every answer stays VALID), and credits no load here spends. */
export const BENCH_RATE_LIMIT = { limit: 1_000_000, duration: 60 };
export const BENCH_CREDITS = 1_000_000_000;
/** The keys the mixed case updates, in turn (each owned round-robin by the users). */
const MIXED_UPDATE_KEYS = 1000;

/** The database label of the floor and the peer: they make their own file, not a copy of a template. */
export const OWN_DATABASE = 'own';

export type CaseName =
  | 'create via JWT'
  | 'durable floor'
  | "durable floor on keygate's file"
  | 'durable floor + duties'
  | 'verify floor'
  | 'forward-auth floor'
  | 'verify floor + duties'
  | 'forward-auth floor + duties'
  | 'create via key'
  | 'delete via JWT'
  | 'delete via key'
  | 'auth failure (403)'
  | 'verify (key)'
  | 'verify (token)'
  | 'forward-auth (key)'
  | 'verify (key with rate limit)'
  | 'verify (key with credits)'
  | 'verify (key with 20 permissions)'
  | 'verify (key with 20 permissions) asked 5'
  | 'verify (key) 2 replicas'
  | 'verify (key with rate limit) 2 replicas'
  | 'verify (key) bench build'
  | 'verify (key) bench build without usage recording'
  | 'mixed 90/9/1 (verify/forward-auth/writes)'
  | 'peer create (better-auth)'
  | 'peer verify (better-auth)'
  | 'create by one user (0 keys)'
  | 'create by one user (10k keys)'
  | 'create by one user (100k keys)'
  | 'create by one user (500k keys)'
  | "fairness: another user's create"
  | 'fairness baseline';

/**
 * With --baseline, these run on the baseline's build as well, beside this build's run in every round,
 * with the same plain keys (no limit), on the empty database in the baseline's own schema.
 */
export const AB_CASES: CaseName[] = ['verify (key)', 'forward-auth (key)'];

/** Their figures are another user's, beside a heavy load: the report gives them their own table. */
export const FAIRNESS_CASES: CaseName[] = ["fairness: another user's create", 'fairness baseline'];

export type Ceiling = 'GET' | 'POST';

/** How the first round made the peer's verify keys; later rounds make as many, however long it takes. */
export type PeerKeys = { created: number; ms: number; used: number };

/** What answers a case: keygate itself, or the yardsticks it is compared with. */
export type Server =
  | 'keygate'
  | 'floor'
  | 'file-floor'
  | 'create-duties-floor'
  | 'verify-floor'
  | 'duties-floor'
  | 'peer';

export type Case = {
  name: CaseName;
  /**
   * Default keygate. The durable floor on keygate's file runs on keygate's SQLite databases too, the
   * one with keygate's duties on the empty one; the others keep their own database and run once a
   * round, not per database.
   */
  server?: Server;
  /** Expected status; non-2xx counts are reported as "unexpected" only where 2xx is expected. */
  expect: number;
  /** The ceiling measured before and after this case (default POST): a GET for GET cases. */
  ceiling?: Ceiling;
  /** Settings of keygate for this case only. */
  env?: Record<string, string>;
  /** Runs on the bench's own build (bench/keygate-entry.ts) instead of dist/keygate. */
  build?: 'bench';
  /** Two keygate processes on the same database, each key's requests spread over both. */
  replicas?: 2;
  /** Only on these of keygate's databases (default: all). */
  databases?: string[];
  /**
   * The verify bodies to send once each to every replica before the warm-up, so that every key the
   * load rotates over is in each replica's key cache: on PostgreSQL, filling 10k keys per replica
   * takes longer than the warm-up, and the cases compared would measure the fill.
   */
  primes?(dbPath: string): string;
  /** Adds the case's own rows to its fresh database copy, once, before the loads are built. */
  seed?(dbPath: string): void;
  /**
   * Runs once the server answers, before the warm-up (the peer's keys are made through its API; the
   * limited keys' first verification is checked).
   */
  prepare?(url: string, dbPath: string): Promise<void>;
  /** Builds the wrk script and args for a run that lasts `seconds` on this database. */
  load(dbPath: string, seconds: number, label: string, rateHint: number): Load;
};

export type WrkLoad = { script: string; args: string[] };

/**
 * What wrk sends. With `light`, a second wrk with one connection runs beside the main one (which then
 * has one connection fewer), and the case's figures are the light one's: how another user fares.
 */
export type Load = WrkLoad & { light?: WrkLoad };

/** What the cases and their fixtures need of the run: its options, its scratch directory, its output. */
export type CaseContext = { options: Options; scratch: string; say(line: string): void };

export type Fixtures = {
  bearerFile: string;
  /** User 1's token only. */
  oneUserBearerFile: string;
  /** User 2's token only (the light user of the fairness cases). */
  secondUserBearerFile: string;
  basicFile: string;
  wrongSecretFile: string;
  /** `{"key","secret"}` bodies and Basic values of the same `--verify-keys` distinct keys. */
  verifyKeyFile: string;
  verifyBasicFile: string;
  /** The peer's create bodies (one per user) and, once prepared, its verify bodies. */
  peerCreateFile: string;
  peerVerifyFile: string;
  verifyTokenFile: string;
  /** keygate's databases by label (empty, seeded, postgres, expired): the file each run copies. */
  templates: Record<string, string>;
};

export async function prepareFixtures(context: CaseContext, jwtSecret: string): Promise<Fixtures> {
  const { options, scratch, say } = context;
  const users = options.users;
  const jwt = createJwtAuthority({ secret: jwtSecret, clock: systemClock });
  const bearers: string[] = [];
  for (let user = 1; user <= users; user++) {
    bearers.push(`Bearer ${await jwt.sign({ sub: user, level: 8, ttlSeconds: 7200 })}`);
  }
  const basics: string[] = [];
  const wrongSecrets: string[] = [];
  const verifyKeys: string[] = [];
  const verifyBasics: string[] = [];
  const verifyTokens = bearers.map((bearer) => JSON.stringify({ token: bearer.slice('Bearer '.length) }));
  const base64 = (text: string) => Buffer.from(text).toString('base64');
  const callerKeys = {
    count: users,
    userOf: (i: number) => i + 1,
    level: 8,
    expiresAt: Date.now() + 30 * DAY_MS,
    name: 'bench caller',
    onKey(id: string, secret: string) {
      basics.push(`Basic ${base64(`${id}:${secret}`)}`);
      wrongSecrets.push(`Basic ${base64(`${id}:${randomBytes(32).toString('base64url')}`)}`);
    },
  };
  // Verify and forward-auth rotate over more distinct keys than there are callers, so a cache of
  // recently seen keys cannot hold them all; they are owned round-robin by the load's users.
  const keysToVerify = {
    count: options.verifyKeys,
    userOf: (i: number) => (i % users) + 1,
    level: 8,
    expiresAt: Date.now() + 30 * DAY_MS,
    name: 'bench verify',
    onKey(id: string, secret: string) {
      verifyKeys.push(JSON.stringify({ key: id, secret }));
      verifyBasics.push(`Basic ${base64(`${id}:${secret}`)}`);
    },
  };
  const templates: Record<string, string> = { empty: join(scratch, 'template-empty.db') };
  seedKeys(templates.empty as string, [callerKeys, keysToVerify]);
  // The PostgreSQL runs start from the same rows, copied over per run.
  if (options.postgres) templates.postgres = templates.empty as string;
  // The seeded keys belong to ten times as many users as the load uses, the load's users among them.
  const seededUsers = users * 10;
  if (options.seed > 0) {
    templates.seeded = join(scratch, 'template-seeded.db');
    copyFileSync(templates.empty as string, templates.seeded);
    const started = performance.now();
    seedKeys(templates.seeded, [
      {
        count: options.seed,
        userOf: (i) => (i % seededUsers) + 1,
        level: 4,
        expiresAt: Date.now() + 30 * DAY_MS,
        name: 'seeded live',
      },
    ]);
    say(`seeded ${options.seed} live keys in ${Math.round(performance.now() - started)} ms`);
  }
  if (options.purge) {
    templates.expired = join(scratch, 'template-expired.db');
    copyFileSync(templates.empty as string, templates.expired);
    const started = performance.now();
    const expiredAt = Date.now() - DAY_MS;
    seedKeys(templates.expired, [
      {
        count: PURGE_KEYS,
        userOf: (i) => (i % seededUsers) + 1,
        level: 4,
        expiresAt: expiredAt,
        name: 'seeded expired',
      },
    ]);
    say(`seeded ${PURGE_KEYS} expired keys in ${Math.round(performance.now() - started)} ms`);
  }
  const write = (name: string, lines: string[]) => {
    const path = join(scratch, name);
    writeFileSync(path, `${lines.join('\n')}\n`, { mode: 0o600 });
    return path;
  };
  return {
    bearerFile: write('bearer.txt', bearers),
    oneUserBearerFile: write('bearer-one-user.txt', bearers.slice(0, 1)),
    secondUserBearerFile: write('bearer-second-user.txt', [
      `Bearer ${await jwt.sign({ sub: 2, level: 8, ttlSeconds: 7200 })}`,
    ]),
    basicFile: write('basic.txt', basics),
    wrongSecretFile: write('wrong-secret.txt', wrongSecrets),
    verifyKeyFile: write('verify-key.txt', verifyKeys),
    verifyBasicFile: write('verify-basic.txt', verifyBasics),
    peerCreateFile: write(
      'peer-create.txt',
      Array.from({ length: users }, (_, i) =>
        JSON.stringify({ userId: String((i % 1000) + 1), name: 'bench', expiresIn: 86400 }),
      ),
    ),
    peerVerifyFile: join(scratch, 'peer-verify.txt'),
    verifyTokenFile: write('verify-token.txt', verifyTokens),
    templates,
  };
}

/** Seeds keys to delete into `dbPath`, owned round-robin by the load's users; returns the list file. */
function seedKeysToDelete(users: number, dbPath: string, count: number, listPath: string): string {
  const ids: string[] = [];
  seedKeys(dbPath, [
    {
      count,
      userOf: (i) => (i % users) + 1,
      level: 1,
      expiresAt: Date.now() + DAY_MS,
      name: 'to delete',
      onKey: (id) => ids.push(id),
    },
  ]);
  writeFileSync(listPath, `${ids.join('\n')}\n`);
  return listPath;
}

/** The permissions each key of the permission cases holds: 20, two of them wildcards. */
export const BENCH_PERMISSIONS = [
  ...Array.from({ length: 18 }, (_, i) => `service${i}.read`),
  'documents.*',
  'billing.*',
];
/** What the query case asks: five names, every one held, so each answer is VALID. */
export const BENCH_PERMISSIONS_QUERY =
  'documents.read AND (billing.invoices.read OR admin) AND service3.read AND service17.read';

/**
 * Seeds `count` keys to verify with a rate limit, credits or permissions into `dbPath`, owned
 * round-robin by the users, and writes their `{"key","secret"}` bodies beside it (bodiesOf), with
 * `asked` (a permissions query) when given, for the load to read.
 */
function seedLimitedKeys(
  users: number,
  dbPath: string,
  count: number,
  limits: {
    ratelimit?: { limit: number; duration: number };
    credits?: number;
    permissions?: readonly string[];
    asked?: string;
  },
): void {
  const { asked, ...settings } = limits;
  const bodies: string[] = [];
  seedKeys(dbPath, [
    {
      count,
      userOf: (i) => (i % users) + 1,
      level: 8,
      expiresAt: Date.now() + 30 * DAY_MS,
      name: 'bench verify (limited)',
      ...settings,
      onKey: (id, secret) =>
        bodies.push(
          JSON.stringify(asked === undefined ? { key: id, secret } : { key: id, secret, permissions: asked }),
        ),
    },
  ]);
  writeFileSync(bodiesOf(dbPath), `${bodies.join('\n')}\n`, { mode: 0o600 });
}

const bodiesOf = (dbPath: string) => `${dbPath}.verify-bodies`;

/**
 * A verify answers 200 whatever its verdict: checks that the first of the keys is VALID and that its
 * answer reports the limit counted (`ratelimit` or `credits`), so the load measures what it says.
 */
async function expectLimitedVerdict(
  url: string,
  bodiesFile: string,
  reported: 'ratelimit' | 'credits' | 'principal',
) {
  const body = readFileSync(bodiesFile, 'utf8').split('\n')[0] as string;
  const response = await fetch(`${url}/apikeys/verify`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body,
  });
  const answer = (await response.json()) as Record<string, unknown>;
  if (answer.code !== 'VALID' || answer[reported] == null) {
    throw new Error(`a limited key's verify answered ${response.status} ${JSON.stringify(answer)}`);
  }
}

// The empty template with user 1's keys, by count: seeded once, copied by every round.
const heldTemplates = new Map<number, string>();

/** User 1's `count` live keys, for the one-user and fairness cases, into a copy of the empty template. */
function seedHeldKeys(dbPath: string, count: number): void {
  if (count === 0) return;
  let template = heldTemplates.get(count);
  if (template === undefined) {
    template = join(dirname(dbPath), `template-held-${count}.db`);
    copyFileSync(dbPath, template);
    seedKeys(template, [{ count, userOf: () => 1, level: 1, expiresAt: Date.now() + DAY_MS, name: 'held' }]);
    heldTemplates.set(count, template);
  }
  copyFileSync(template, dbPath);
}

/**
 * Every case, in the order a round runs them. `peer` receives how the first round made the peer's
 * verify keys (the report states it).
 */
export function cases(context: CaseContext, fixtures: Fixtures, peer: { keys?: PeerKeys }): Case[] {
  const { options, scratch } = context;
  const deletes = (suffix: 'jwt' | 'key', authFile: string) => {
    return (dbPath: string, seconds: number, label: string, rateHint: number) => {
      // Enough keys for the measured rate and then half again; past the end they answer 404 (non-2xx).
      const count = Math.ceil(rateHint * seconds * 1.5) + options.users;
      const list = seedKeysToDelete(options.users, dbPath, count, join(scratch, `${label}.keys`));
      return { script: 'delete.lua', args: [suffix, list, authFile] };
    };
  };
  // The loads keygate's cases share with the floors measured beside them: the same requests.
  const createViaJwt = () => ({ script: 'create.lua', args: ['/apikeys/jwt', fixtures.bearerFile] });
  const verifyKey = () => ({ script: 'post-body.lua', args: ['/apikeys/verify', fixtures.verifyKeyFile] });
  const forwardAuthKey = () => ({
    script: 'authorized-get.lua',
    args: ['/forward-auth', fixtures.verifyBasicFile],
  });
  // Keys with their own rate limit or credits, as many as the verify case rotates over.
  const limitedKeys = (limits: Parameters<typeof seedLimitedKeys>[3]) => ({
    seed: (dbPath: string) => seedLimitedKeys(options.users, dbPath, options.verifyKeys, limits),
    prepare: (url: string, dbPath: string) =>
      expectLimitedVerdict(
        url,
        bodiesOf(dbPath),
        limits.ratelimit ? 'ratelimit' : limits.credits !== undefined ? 'credits' : 'principal',
      ),
    primes: bodiesOf,
    load: (dbPath: string) => ({ script: 'post-body.lua', args: ['/apikeys/verify', bodiesOf(dbPath)] }),
  });
  const mixed = (dbPath: string, seconds: number, label: string, rateHint: number) => {
    const updates = seedKeysToDelete(
      options.users,
      dbPath,
      MIXED_UPDATE_KEYS,
      join(scratch, `${label}.update`),
    );
    // One request in 300 is a delete: enough keys for the measured rate and then half again.
    const count = Math.ceil((rateHint * seconds * 1.5) / 300) + options.users;
    const deletes = seedKeysToDelete(options.users, dbPath, count, join(scratch, `${label}.delete`));
    return {
      script: 'mixed.lua',
      args: [fixtures.verifyKeyFile, fixtures.verifyBasicFile, fixtures.bearerFile, updates, deletes],
    };
  };
  return [
    {
      name: 'create via JWT',
      expect: 201,
      load: createViaJwt,
    },
    {
      // The least a durable create can do on this core (bench/durable-floor.ts), under the same load.
      name: 'durable floor',
      expect: 201,
      server: 'floor',
      load: createViaJwt,
    },
    {
      // The same floor inserting keygate's rows into a copy of keygate's database, empty and with 1M
      // keys: what the file's size alone costs a durable insert.
      name: "durable floor on keygate's file",
      expect: 201,
      server: 'file-floor',
      load: createViaJwt,
    },
    {
      // And doing what a create owes beside its insert (the token, the key and its hash, the cap's
      // count, the audit and request lines, the headers): the least keygate's create could cost.
      name: 'durable floor + duties',
      expect: 201,
      server: 'create-duties-floor',
      load: createViaJwt,
    },
    {
      name: 'create via key',
      expect: 201,
      load: () => ({ script: 'create.lua', args: ['/apikeys/key', fixtures.basicFile] }),
    },
    {
      name: 'auth failure (403)',
      expect: 403,
      load: () => ({ script: 'create.lua', args: ['/apikeys/key', fixtures.wrongSecretFile] }),
    },
    { name: 'delete via JWT', expect: 204, load: deletes('jwt', fixtures.bearerFile) },
    { name: 'delete via key', expect: 204, load: deletes('key', fixtures.basicFile) },
    {
      name: 'verify (key)',
      expect: 200,
      primes: () => fixtures.verifyKeyFile,
      load: verifyKey,
    },
    {
      // Each of 10k keys with its own rate limit, which no answer here reaches: what counting costs.
      name: 'verify (key with rate limit)',
      expect: 200,
      ...limitedKeys({ ratelimit: BENCH_RATE_LIMIT }),
    },
    {
      // Each VALID answer takes a credit, committed before the answer (on SQLite, the group commit).
      name: 'verify (key with credits)',
      expect: 200,
      ...limitedKeys({ credits: BENCH_CREDITS }),
    },
    {
      // Keys holding 20 permissions, verified without a query: the baseline of the next case (the same
      // principal, 20 names long, in every answer).
      name: 'verify (key with 20 permissions)',
      expect: 200,
      ...limitedKeys({ permissions: BENCH_PERMISSIONS }),
    },
    {
      // The same keys asked a 5-name query: what parsing (once, then a cache hit) and checking cost.
      name: 'verify (key with 20 permissions) asked 5',
      expect: 200,
      ...limitedKeys({ permissions: BENCH_PERMISSIONS, asked: BENCH_PERMISSIONS_QUERY }),
    },
    {
      // The PostgreSQL limiter's cost across replicas: two keygates on one database, with wrk's two
      // threads each sending every key's requests to one of them.
      name: 'verify (key) 2 replicas',
      expect: 200,
      replicas: 2,
      databases: ['postgres'],
      primes: () => fixtures.verifyKeyFile,
      load: verifyKey,
    },
    {
      name: 'verify (key with rate limit) 2 replicas',
      expect: 200,
      replicas: 2,
      databases: ['postgres'],
      ...limitedKeys({ ratelimit: BENCH_RATE_LIMIT }),
    },
    {
      // The bench's own build, with and without usage recording: what recording costs a verify.
      name: 'verify (key) bench build',
      expect: 200,
      build: 'bench',
      databases: ['empty'],
      load: verifyKey,
    },
    {
      name: 'verify (key) bench build without usage recording',
      expect: 200,
      build: 'bench',
      databases: ['empty'],
      env: { BENCH_USAGE_RECORDING: 'off' },
      load: verifyKey,
    },
    {
      name: 'mixed 90/9/1 (verify/forward-auth/writes)',
      expect: 200,
      load: mixed,
    },
    {
      name: 'verify (token)',
      expect: 200,
      load: () => ({ script: 'post-body.lua', args: ['/apikeys/verify', fixtures.verifyTokenFile] }),
    },
    ...([0, 10_000, 100_000, 500_000] as const).map(
      (held): Case => ({
        name: `create by one user (${held === 0 ? '0' : `${held / 1000}k`} keys)` as CaseName,
        expect: 201,
        // One user holds `held` live keys and creates more; the cap is out of the way.
        env: { MAX_KEYS_PER_USER: UNCAPPED },
        seed: (dbPath) => seedHeldKeys(dbPath, held),
        load: () => ({ script: 'create.lua', args: ['/apikeys/jwt', fixtures.oneUserBearerFile] }),
      }),
    ),
    // User 1 holds 100k live keys in both; the heavy load creates as user 1 alone, or as all the
    // users (the baseline). User 2 creates beside it on one connection: its latency is the figure.
    ...(
      [
        ["fairness: another user's create", fixtures.oneUserBearerFile],
        ['fairness baseline', fixtures.bearerFile],
      ] as const
    ).map(
      ([name, heavyBearers]): Case => ({
        name,
        expect: 201,
        env: { MAX_KEYS_PER_USER: UNCAPPED },
        seed: (dbPath) => seedHeldKeys(dbPath, 100_000),
        load: () => ({
          script: 'create.lua',
          args: ['/apikeys/jwt', heavyBearers],
          light: { script: 'create.lua', args: ['/apikeys/jwt', fixtures.secondUserBearerFile] },
        }),
      }),
    ),
    {
      name: 'forward-auth (key)',
      expect: 200,
      ceiling: 'GET',
      load: forwardAuthKey,
    },
    {
      // The least a verify can do on Elysia (bench/verify-floor.ts): same keys, same requests.
      name: 'verify floor',
      expect: 200,
      server: 'verify-floor',
      load: verifyKey,
    },
    {
      name: 'forward-auth floor',
      expect: 200,
      server: 'verify-floor',
      ceiling: 'GET',
      load: forwardAuthKey,
    },
    {
      // The same floors doing what keygate owes every answer as well (request id, headers, the log
      // line, strict UTF-8): the least keygate's verify and forward-auth could cost.
      name: 'verify floor + duties',
      expect: 200,
      server: 'duties-floor',
      load: verifyKey,
    },
    {
      name: 'forward-auth floor + duties',
      expect: 200,
      server: 'duties-floor',
      ceiling: 'GET',
      load: forwardAuthKey,
    },
    {
      name: 'peer create (better-auth)',
      expect: 201,
      server: 'peer',
      load: () => ({ script: 'post-body.lua', args: ['/create', fixtures.peerCreateFile] }),
    },
    {
      name: 'peer verify (better-auth)',
      expect: 200,
      server: 'peer',
      prepare: (url) => preparePeerKeys(context, url, fixtures, peer),
      load: () => ({ script: 'post-body.lua', args: ['/verify', fixtures.peerVerifyFile] }),
    },
  ];
}

/**
 * The databases a case runs on: keygate's all (or those the case names), the durable floors on
 * keygate's file SQLite ones.
 */
export function databasesOf(benchCase: Pick<Case, 'server' | 'databases'>, dbs: string[]): string[] {
  const server = benchCase.server ?? 'keygate';
  if (server === 'keygate') return dbs.filter((db) => benchCase.databases?.includes(db) ?? true);
  if (server === 'file-floor') return dbs.filter((db) => db !== 'postgres');
  if (server === 'create-duties-floor') return ['empty'];
  return [OWN_DATABASE];
}

/**
 * Creates the keys the peer's verify case rotates over through its own API (its key hashing and
 * storage are its own): 10k like keygate's if that fits in ~20 s, else 1000. Checks one verifies.
 */
async function preparePeerKeys(
  context: CaseContext,
  url: string,
  fixtures: Fixtures,
  peer: { keys?: PeerKeys },
): Promise<void> {
  const bodies = readFileSync(fixtures.peerCreateFile, 'utf8').split('\n').filter(Boolean);
  const keys: string[] = [];
  const started = performance.now();
  // Every round verifies over the same number of keys, the number the first round settled on.
  const wanted = peer.keys?.used ?? PEER_VERIFY_KEYS;
  const budgetMs = peer.keys ? Number.POSITIVE_INFINITY : PEER_PREPARE_MS;
  let next = 0;
  const creator = async () => {
    while (next < wanted && performance.now() - started < budgetMs) {
      const body = bodies[next++ % bodies.length] as string;
      const response = await fetch(`${url}/create`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body,
      });
      if (response.status !== 201) throw new Error(`peer /create answered ${response.status}`);
      keys.push(((await response.json()) as { apikey: { key: string } }).apikey.key);
    }
  };
  await Promise.all(Array.from({ length: 32 }, creator));
  const ms = performance.now() - started;
  const used = keys.length >= wanted ? keys : keys.slice(0, PEER_FEWER_KEYS);
  if (used.length < PEER_FEWER_KEYS) throw new Error(`only ${keys.length} peer keys in ${Math.round(ms)} ms`);
  const check = await fetch(`${url}/verify`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ key: used[0] }),
  });
  const answer = (await check.json()) as { valid?: boolean };
  if (check.status !== 200 || answer.valid !== true) {
    throw new Error(`peer /verify of a fresh key answered ${check.status}, valid ${answer.valid}`);
  }
  writeFileSync(fixtures.peerVerifyFile, `${used.map((key) => JSON.stringify({ key })).join('\n')}\n`, {
    mode: 0o600,
  });
  peer.keys ??= { created: keys.length, ms, used: used.length };
  context.say(
    `peer: ${keys.length} keys created through its API in ${Math.round(ms)} ms; verify rotates over ${used.length}`,
  );
}
