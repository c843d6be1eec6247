// The load benchmark (`bun run bench`): builds dist/keygate, runs it pinned to CPU 0 beside a bare
// Elysia "ceiling" on the same core, drives both with wrk pinned to CPU 1, and writes bench/RESULTS.md.
// Every keygate run sits between two ceiling runs of the same round (POST, or GET for forward-auth);
// its ratio is to their mean.
// Options: --duration S --warmup S --rounds N --connections N --users N --seed N --verify-keys N --purge
//          --postgres --log-level L --no-build --metrics (each also BENCH_DURATION, BENCH_VERIFY_KEYS, ...).
// --postgres runs every case once more on a throwaway PostgreSQL (Debian's server, pinned to the
// server's CPU beside keygate, synchronous_commit on), from the same empty database.
// --metrics: keygate also serves /metrics on a second port (to measure what metrics cost).

import { Database } from 'bun:sqlite';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { SQL, type Subprocess } from 'bun';
import { createJwtAuthority } from '../src/auth/jwt';
import { systemClock } from '../src/core/clock';
import { openPostgres } from '../src/db/postgres/open';
import { startPostgres, type ThrowawayPostgres } from '../test/support/postgres';
import { seedKeys } from './seed';

const ROOT = join(import.meta.dir, '..');
const BENCH = import.meta.dir;
const LUA = join(BENCH, 'lua');
const BUILT_BINARY = join(ROOT, 'dist', 'keygate');
// The run uses its own copy, so a rebuild by someone else mid-run cannot change what is measured.
let BINARY = BUILT_BINARY;
const RESULTS_FILE = join(BENCH, 'RESULTS.md');
const HISTORY_HEADING = '## History';
const SERVER_CPU = '0';
const LOAD_CPU = '1';
const DAY_MS = 86_400_000;

type Options = {
  duration: number;
  warmup: number;
  rounds: number;
  connections: number;
  users: number;
  seed: number;
  /** Distinct keys the verify and forward-auth cases rotate over (in every database). */
  verifyKeys: number;
  purge: boolean;
  metrics: boolean;
  postgres: boolean;
  logLevel: string;
  build: boolean;
  startups: number;
  /** Only the cases whose name contains one of these (comma-separated); empty: all. */
  cases: string[];
};

function parseOptions(argv: string[]): Options {
  const env = (name: string, fallback: string) => process.env[`BENCH_${name}`] || fallback;
  const options: Options = {
    duration: Number(env('DURATION', '4')),
    // 3 s: the ceiling stays up (and warm) for the whole run, while each case starts a fresh server
    // that compiles its hot path on the same core in its first seconds; after 1 s keygate's verify was
    // 0.84-0.88 of its duties floor, after 3-5 s 0.95-0.99 (bench/RESULTS.md, History).
    warmup: Number(env('WARMUP', '3')),
    rounds: Number(env('ROUNDS', '3')),
    connections: Number(env('CONNECTIONS', '64')),
    users: Number(env('USERS', '1000')),
    seed: Number(env('SEED', '0')),
    verifyKeys: Number(env('VERIFY_KEYS', '10000')),
    purge: env('PURGE', '') === '1',
    metrics: env('METRICS', '') === '1',
    postgres: env('POSTGRES', '') === '1',
    logLevel: env('LOG_LEVEL', 'info'),
    build: env('BUILD', '1') !== '0',
    startups: Number(env('STARTUPS', '20')),
    cases: env('CASES', '').split(',').filter(Boolean),
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const value = () => {
      const next = argv[++i];
      if (next === undefined) throw new Error(`${arg} needs a value`);
      return next;
    };
    if (arg === '--purge') options.purge = true;
    else if (arg === '--metrics') options.metrics = true;
    else if (arg === '--postgres') options.postgres = true;
    else if (arg === '--no-build') options.build = false;
    else if (arg === '--duration') options.duration = Number(value());
    else if (arg === '--warmup') options.warmup = Number(value());
    else if (arg === '--rounds') options.rounds = Number(value());
    else if (arg === '--connections') options.connections = Number(value());
    else if (arg === '--users') options.users = Number(value());
    else if (arg === '--seed') options.seed = Number(value());
    else if (arg === '--verify-keys') options.verifyKeys = Number(value());
    else if (arg === '--startups') options.startups = Number(value());
    else if (arg === '--log-level') options.logLevel = value();
    else if (arg === '--cases') options.cases = value().split(',').filter(Boolean);
    else throw new Error(`unknown option ${arg}`);
  }
  for (const [name, number] of Object.entries(options)) {
    if (typeof number === 'number' && !(Number.isInteger(number) && number >= 0 && number <= 100_000_000)) {
      throw new Error(`--${name} must be a whole number`);
    }
  }
  // --rounds 0 skips the cases (with --purge: the purge measurement alone).
  if (options.duration < 1 || options.users < 1 || options.connections < 1 || options.verifyKeys < 1) {
    throw new Error('--duration, --users, --connections and --verify-keys must be at least 1');
  }
  return options;
}

// ---------------------------------------------------------------- processes we started, and only those

const children = new Set<Subprocess>();
let scratch = '';

function start(command: string[], options: { env?: Record<string, string>; stdout?: string } = {}) {
  const child = Bun.spawn(command, {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...options.env },
    stdout: options.stdout ? Bun.file(options.stdout) : 'pipe',
    stderr: 'pipe',
  });
  children.add(child);
  child.exited.then(() => children.delete(child));
  return child;
}

async function stop(child: Subprocess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const exited = await Promise.race([child.exited.then(() => true), Bun.sleep(graceMs).then(() => false)]);
  if (!exited) {
    child.kill('SIGKILL');
    await child.exited;
  }
}

function cleanUp(): void {
  for (const child of children) child.kill('SIGKILL');
  if (scratch) rmSync(scratch, { recursive: true, force: true });
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    process.stderr.write(`\nbench: ${signal}, stopping what it started\n`);
    cleanUp();
    process.exit(130);
  });
}

// ---------------------------------------------------------------- wrk

type Figures = {
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  max: number;
  non2xx: number;
  socketErrors: number;
};

async function wrk(url: string, script: string, args: string[], seconds: number, connections: number) {
  const child = start([
    'taskset',
    '-c',
    LOAD_CPU,
    'wrk',
    '-t1',
    `-c${connections}`,
    `-d${seconds}s`,
    '-s',
    join(LUA, script),
    url,
    '--',
    ...args,
  ]);
  const [output, errors] = await Promise.all([
    new Response(child.stdout as ReadableStream).text(),
    new Response(child.stderr as ReadableStream).text(),
  ]);
  await child.exited;
  const line = output.split('\n').find((l) => l.startsWith('BENCH_JSON '));
  if (!line) throw new Error(`wrk gave no result for ${url}: ${output}${errors}`);
  const raw = JSON.parse(line.slice('BENCH_JSON '.length));
  return {
    requests: raw.requests,
    rps: raw.requests / (raw.duration_us / 1e6),
    p50: raw.p50_us / 1000,
    p99: raw.p99_us / 1000,
    max: raw.max_us / 1000,
    non2xx: raw.non2xx,
    socketErrors: raw.socket_errors,
  } satisfies Figures;
}

// ---------------------------------------------------------------- keygate and the ceiling

function freePort(): number {
  const listener = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

async function waitFor200(url: string, deadlineMs: number): Promise<void> {
  const deadline = performance.now() + deadlineMs;
  while (performance.now() < deadline) {
    try {
      const response = await fetch(url);
      await response.arrayBuffer();
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    await Bun.sleep(1);
  }
  throw new Error(`${url} did not answer 200 within ${deadlineMs} ms`);
}

type Running = { child: Subprocess; url: string; log: string };

async function startKeygate(dbPath: string, env: Record<string, string>, log: string): Promise<Running> {
  const port = freePort();
  const child = start(['taskset', '-c', SERVER_CPU, BINARY, 'serve'], {
    env: {
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: dbPath,
      JWT_SECRET: jwtSecret,
      LOG_LEVEL: options.logLevel,
      ...(options.metrics ? { METRICS_HOST: '127.0.0.1', METRICS_PORT: String(freePort()) } : {}),
      ...env,
    },
    stdout: log,
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor200(`${url}/health`, 10_000);
  return { child, url, log };
}

/** Polls until the server answers anything at all (the floor and the peer have no health route). */
async function waitForAnswer(url: string, deadlineMs: number): Promise<void> {
  const deadline = performance.now() + deadlineMs;
  while (performance.now() < deadline) {
    try {
      await (await fetch(url)).arrayBuffer();
      return;
    } catch {
      // not listening yet
    }
    await Bun.sleep(5);
  }
  throw new Error(`${url} did not answer within ${deadlineMs} ms`);
}

const PEER = join(BENCH, 'peer');

/**
 * A yardstick from source (`bun <script> <port> ...args`), pinned like keygate; resolves once it
 * answers. The durable floor (its database under the scratch dir, or a copy of keygate's, with or
 * without a create's duties), the verify floor with or without keygate's per-answer duties (the keys
 * of a database file) and the peer (better-auth, which migrates and adds its 1000 users first).
 */
async function startYardstick(
  server: Exclude<Server, 'keygate'>,
  dbPath: string,
  log: string,
): Promise<Running> {
  const [script, args, waitMs] = {
    floor: [join(BENCH, 'durable-floor.ts'), ['full'], 10_000],
    'file-floor': [join(BENCH, 'durable-floor.ts'), ['full', dbPath], 10_000],
    'create-duties-floor': [join(BENCH, 'durable-floor.ts'), ['full', dbPath, 'duties'], 10_000],
    'verify-floor': [join(BENCH, 'verify-floor.ts'), [dbPath], 10_000],
    'duties-floor': [join(BENCH, 'verify-floor.ts'), [dbPath, 'duties'], 10_000],
    peer: [join(PEER, 'server.ts'), [dbPath], 30_000],
  }[server] as [string, string[], number];
  const port = freePort();
  const child = start(['taskset', '-c', SERVER_CPU, 'bun', script, String(port), ...args], {
    // The durable floor makes its database in a fresh directory under the temporary directory; with
    // keygate's duties it checks the load's tokens.
    env: { TMPDIR: scratch, JWT_SECRET: jwtSecret },
    stdout: log,
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForAnswer(url, waitMs);
  return { child, url, log };
}

/** The peer has its own package.json; its dependencies are installed on first use. */
function ensurePeerInstalled(): void {
  if (existsSync(join(PEER, 'node_modules'))) return;
  say('bench/peer: bun install --frozen-lockfile ...');
  const install = Bun.spawnSync(['bun', 'install', '--frozen-lockfile'], {
    cwd: PEER,
    stdout: 'inherit',
    stderr: 'inherit',
  });
  if (install.exitCode !== 0) throw new Error('bun install in bench/peer failed');
}

const PEER_VERIFY_KEYS = 10_000;
const PEER_FEWER_KEYS = 1000;
const PEER_PREPARE_MS = 20_000;
/** How the first round made the peer's verify keys; later rounds make as many, however long it takes. */
let peerKeys: { created: number; ms: number; used: number } | undefined;

/**
 * Creates the keys the peer's verify case rotates over through its own API (its key hashing and
 * storage are its own): 10k like keygate's if that fits in ~20 s, else 1000. Checks one verifies.
 */
async function preparePeerKeys(url: string, createFile: string, verifyFile: string): Promise<void> {
  const bodies = readFileSync(createFile, 'utf8').split('\n').filter(Boolean);
  const keys: string[] = [];
  const started = performance.now();
  // Every round verifies over the same number of keys, the number the first round settled on.
  const wanted = peerKeys?.used ?? PEER_VERIFY_KEYS;
  const budgetMs = peerKeys ? Number.POSITIVE_INFINITY : PEER_PREPARE_MS;
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
  writeFileSync(verifyFile, `${used.map((key) => JSON.stringify({ key })).join('\n')}\n`, { mode: 0o600 });
  peerKeys ??= { created: keys.length, ms, used: used.length };
  say(
    `peer: ${keys.length} keys created through its API in ${Math.round(ms)} ms; verify rotates over ${used.length}`,
  );
}

function memoryOf(pid: number): { rssKb: number; hwmKb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return { rssKb: field('VmRSS'), hwmKb: field('VmHWM') };
}

// ---------------------------------------------------------------- fixtures

const options = parseOptions(process.argv.slice(2));
const jwtSecret = randomBytes(48).toString('base64url');

type Fixtures = {
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
  templates: Record<string, string>;
};

async function prepareFixtures(): Promise<Fixtures> {
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
  // The PostgreSQL runs start from the same rows, copied over per run (toPostgres).
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

const PURGE_KEYS = 1_000_000;

/** Seeds keys to delete into `dbPath`, owned round-robin by the load's users; returns the list file. */
function seedKeysToDelete(dbPath: string, count: number, listPath: string): string {
  const ids: string[] = [];
  seedKeys(dbPath, [
    {
      count,
      userOf: (i) => (i % options.users) + 1,
      level: 1,
      expiresAt: Date.now() + DAY_MS,
      name: 'to delete',
      onKey: (id) => ids.push(id),
    },
  ]);
  writeFileSync(listPath, `${ids.join('\n')}\n`);
  return listPath;
}

// ---------------------------------------------------------------- PostgreSQL (--postgres)

let postgres: { server: ThrowawayPostgres; admin: SQL } | undefined;
const PG_TEMPLATE = 'bench_template';

/** A throwaway PostgreSQL pinned to the server's CPU, and a migrated, empty template database. */
async function startBenchPostgres(): Promise<void> {
  const server = await startPostgres({ maxConnections: 300 });
  process.on('exit', () => server.destroy());
  // Its processes share keygate's core, as SQLite's work shares keygate's process.
  const pids = [String(server.pid())];
  const children = Bun.spawnSync(['ps', '-o', 'pid=', '--ppid', String(server.pid())]).stdout.toString();
  pids.push(
    ...children
      .split('\n')
      .map((pid) => pid.trim())
      .filter(Boolean),
  );
  for (const pid of pids) Bun.spawnSync(['taskset', '-a', '-pc', SERVER_CPU, pid], { stdout: 'ignore' });
  const templateUrl = server.createDatabase(PG_TEMPLATE);
  const db = await openPostgres(templateUrl, 1);
  await db.$client.close();
  postgres = { server, admin: new SQL(server.url.replace(/\/keygate$/, '/postgres'), { max: 1 }) };
  say(`PostgreSQL ${server.url} (pinned to CPU ${SERVER_CPU}, synchronous_commit on)`);
}

async function stopBenchPostgres(): Promise<void> {
  if (!postgres) return;
  await postgres.admin.close();
  postgres.server.destroy();
  postgres = undefined;
}

/** A fresh PostgreSQL database holding the rows of the SQLite file a case prepared; its URL. */
async function toPostgres(dbPath: string, label: string): Promise<string> {
  if (!postgres) throw new Error('PostgreSQL is not started');
  const name = `bench_${label.replace(/\W+/g, '_').toLowerCase()}`;
  await postgres.admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${PG_TEMPLATE}`);
  const url = postgres.server.url.replace(/\/keygate$/, `/${name}`);
  const source = new Database(dbPath, { readonly: true });
  const rows = source
    .query('SELECT id, secret_hash, user_id, level, name, created_at, expires_at FROM api_keys')
    .all() as Array<Record<string, unknown> & { secret_hash: Uint8Array }>;
  source.close();
  const target = new SQL(url, { max: 1 });
  for (let i = 0; i < rows.length; i += 5000) {
    const batch = rows
      .slice(i, i + 5000)
      .map((row) => ({ ...row, secret_hash: Buffer.from(row.secret_hash).toString('hex') }));
    await target`INSERT INTO api_keys ${target(batch)}`;
  }
  await target.close();
  return url;
}

async function dropPostgres(url: string): Promise<void> {
  await postgres?.admin.unsafe(`DROP DATABASE IF EXISTS ${new URL(url).pathname.slice(1)}`);
}

// ---------------------------------------------------------------- the cases

type CaseName =
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
  | 'peer create (better-auth)'
  | 'peer verify (better-auth)'
  | 'create by one user (0 keys)'
  | 'create by one user (10k keys)'
  | 'create by one user (100k keys)'
  | "fairness: another user's create"
  | 'fairness baseline';

type Ceiling = 'GET' | 'POST';

/** What answers a case: keygate itself, or the yardsticks it is compared with. */
type Server =
  | 'keygate'
  | 'floor'
  | 'file-floor'
  | 'create-duties-floor'
  | 'verify-floor'
  | 'duties-floor'
  | 'peer';

type Case = {
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
  /** Adds the case's own rows to its fresh database copy, once, before the loads are built. */
  seed?(dbPath: string): void;
  /** Runs once the server answers, before the warm-up (the peer's keys are made through its API). */
  prepare?(url: string): Promise<void>;
  /** Builds the wrk script and args for a run that lasts `seconds` on this database. */
  load(dbPath: string, seconds: number, label: string, rateHint: number): Load;
};

type WrkLoad = { script: string; args: string[] };

/**
 * What wrk sends. With `light`, a second wrk with one connection runs beside the main one (which then
 * has one connection fewer), and the case's figures are the light one's: how another user fares.
 */
type Load = WrkLoad & { light?: WrkLoad };

const UNCAPPED = '1000000000';

/** User 1's `count` live keys, for the one-user and fairness cases. */
function seedHeldKeys(dbPath: string, count: number): void {
  if (count === 0) return;
  seedKeys(dbPath, [{ count, userOf: () => 1, level: 1, expiresAt: Date.now() + DAY_MS, name: 'held' }]);
}

function cases(fixtures: Fixtures): Case[] {
  const deletes = (suffix: 'jwt' | 'key', authFile: string) => {
    return (dbPath: string, seconds: number, label: string, rateHint: number) => {
      // Enough keys for the measured rate and then half again; past the end they answer 404 (non-2xx).
      const count = Math.ceil(rateHint * seconds * 1.5) + options.users;
      const list = seedKeysToDelete(dbPath, count, join(scratch, `${label}.keys`));
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
      load: verifyKey,
    },
    {
      name: 'verify (token)',
      expect: 200,
      load: () => ({ script: 'post-body.lua', args: ['/apikeys/verify', fixtures.verifyTokenFile] }),
    },
    ...([0, 10_000, 100_000] as const).map(
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
      prepare: (url) => preparePeerKeys(url, fixtures.peerCreateFile, fixtures.peerVerifyFile),
      load: () => ({ script: 'post-body.lua', args: ['/verify', fixtures.peerVerifyFile] }),
    },
  ];
}

// ---------------------------------------------------------------- one case on one database

/** The database label of the floor and the peer: they make their own file, not a copy of a template. */
const OWN_DATABASE = 'own';

/** The databases a case runs on: keygate's all, the durable floors on keygate's file SQLite ones. */
function databasesOf(server: Server, dbs: string[]): string[] {
  if (server === 'keygate') return dbs;
  if (server === 'file-floor') return dbs.filter((db) => db !== 'postgres');
  if (server === 'create-duties-floor') return ['empty'];
  return [OWN_DATABASE];
}

/** Starts the case's server on a fresh database, warms it up, measures, stops it; keygate's RSS into `memory`. */
async function runCase(
  benchCase: Case,
  db: string,
  label: string,
  rateHint: number,
  fixtures: Fixtures,
  memory: Record<string, { idleKb: number[]; peakKb: number[] }>,
): Promise<Figures & { heavyRps?: number }> {
  const dbPath = join(scratch, `${label}.db`);
  const log = join(scratch, `${label}.log`);
  const server = benchCase.server ?? 'keygate';
  // A case run on one of keygate's databases starts from a copy of its template (databasesOf).
  if (db !== OWN_DATABASE) copyFileSync(fixtures.templates[db] as string, dbPath);
  // The verify floor loads the keys of the empty template (the callers and the verify keys).
  if (server === 'verify-floor' || server === 'duties-floor') {
    copyFileSync(fixtures.templates.empty as string, dbPath);
  }
  benchCase.seed?.(dbPath);
  const warm = benchCase.load(dbPath, options.warmup, `${label}-warm`, rateHint);
  const measured = benchCase.load(dbPath, options.duration, label, rateHint);
  const databaseUrl = db === 'postgres' ? await toPostgres(dbPath, label) : dbPath;
  const running =
    server === 'keygate'
      ? await startKeygate(databaseUrl, benchCase.env ?? {}, log)
      : await startYardstick(server, dbPath, log);
  await benchCase.prepare?.(running.url);
  const idle = memoryOf(running.child.pid);
  await drive(running.url, warm, options.warmup);
  const { figures, heavy } = await drive(running.url, measured, options.duration);
  const peak = memoryOf(running.child.pid);
  await stop(running.child);
  rmSync(dbPath, { force: true });
  rmSync(`${dbPath}-wal`, { force: true });
  rmSync(`${dbPath}-shm`, { force: true });
  rmSync(log, { force: true });
  if (db === 'postgres') await dropPostgres(databaseUrl);
  if (server === 'keygate') {
    memory[db]?.idleKb.push(idle.rssKb);
    memory[db]?.peakKb.push(peak.hwmKb);
  }
  return { ...figures, heavyRps: heavy?.rps };
}

/** Runs a case's load; with a light load beside it, both wrk processes at once on the load CPU. */
async function drive(
  url: string,
  load: Load,
  seconds: number,
): Promise<{ figures: Figures; heavy?: Figures }> {
  if (!load.light) return { figures: await wrk(url, load.script, load.args, seconds, options.connections) };
  const [heavy, light] = await Promise.all([
    wrk(url, load.script, load.args, seconds, Math.max(1, options.connections - 1)),
    wrk(url, load.light.script, load.light.args, seconds, 1),
  ]);
  return { figures: light, heavy };
}

// ---------------------------------------------------------------- start-up time

async function measureStartup(): Promise<{ medianMs: number; minMs: number; maxMs: number }> {
  const times: number[] = [];
  for (let i = 0; i < options.startups; i++) {
    const dir = join(scratch, `startup-${i}`);
    mkdirSync(dir);
    const port = freePort();
    const started = performance.now();
    const child = start(['taskset', '-c', SERVER_CPU, BINARY, 'serve'], {
      env: {
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_URL: join(dir, 'keygate.db'),
        JWT_SECRET: jwtSecret,
        LOG_LEVEL: options.logLevel,
      },
      stdout: join(dir, 'log'),
    });
    // Polled with no sleep: a refused connection costs microseconds, and CPU 1 is ours.
    const deadline = started + 10_000;
    let up = false;
    while (!up && performance.now() < deadline) {
      try {
        const response = await fetch(`http://127.0.0.1:${port}/health`);
        await response.arrayBuffer();
        up = response.status === 200;
      } catch {
        // not yet
      }
    }
    const elapsed = performance.now() - started;
    await stop(child);
    if (!up) throw new Error('keygate did not answer /health within 10 s');
    times.push(elapsed);
  }
  return { medianMs: median(times), minMs: Math.min(...times), maxMs: Math.max(...times) };
}

// ---------------------------------------------------------------- statistics and output

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

type Run = Figures & {
  /** The fairness cases: the heavy load's rate (the figures are the light user's). */
  heavyRps?: number;
  round: number;
  case: CaseName;
  db: string;
  ceiling: Ceiling;
  ceilingRps: number;
  ceilingP99: number;
  expect: number;
};

const fixed = (value: number, digits = 2) => value.toFixed(digits);
const thousands = (value: number) => Math.round(value).toLocaleString('en-US');

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const begun = performance.now();
  // Pin ourselves (and so the fetches of the start-up measurement) to the load CPU.
  Bun.spawnSync(['taskset', '-a', '-pc', LOAD_CPU, String(process.pid)], { stdout: 'ignore' });
  if (!Bun.which('wrk')) {
    say('bench: wrk is not installed: apt-get install wrk');
    process.exit(1);
  }
  if (options.build) {
    say('building dist/keygate ...');
    const build = Bun.spawnSync(['bun', 'run', 'build'], { cwd: ROOT, stdout: 'inherit', stderr: 'inherit' });
    if (build.exitCode !== 0) throw new Error('bun run build failed');
  }
  mkdirSync(join(BENCH, '.run'), { recursive: true });
  scratch = join(BENCH, '.run', `run-${process.pid}-${Date.now()}`);
  mkdirSync(scratch);
  BINARY = join(scratch, 'keygate');
  copyFileSync(BUILT_BINARY, BINARY);
  chmodSync(BINARY, 0o755);

  if (options.postgres) await startBenchPostgres();
  const fixtures = await prepareFixtures();
  const ceilingPort = freePort();
  const ceiling = start(['taskset', '-c', SERVER_CPU, 'bun', join(BENCH, 'ceiling.ts')], {
    env: { PORT: String(ceilingPort) },
  });
  const ceilingUrl = `http://127.0.0.1:${ceilingPort}`;
  await waitFor200(`${ceilingUrl}/health`, 10_000);

  say(`start-up: ${options.startups} starts of the compiled binary ...`);
  const startup = await measureStartup();
  say(
    `start-up median ${fixed(startup.medianMs, 1)} ms (min ${fixed(startup.minMs, 1)}, max ${fixed(startup.maxMs, 1)})`,
  );

  const ceilingGets: Figures[] = [];
  const ceilingRun = async (kind: Ceiling, seconds: number) => {
    if (kind === 'POST') {
      return wrk(
        ceilingUrl,
        'create.lua',
        ['/apikeys/jwt', fixtures.bearerFile],
        seconds,
        options.connections,
      );
    }
    const get = await wrk(`${ceilingUrl}/health`, 'get.lua', [], seconds, options.connections);
    ceilingGets.push(get);
    return get;
  };
  await ceilingRun('POST', options.warmup + 1);

  const dbs = Object.keys(fixtures.templates).filter((name) => name !== 'expired');
  const runs: Run[] = [];
  const memory: Record<string, { idleKb: number[]; peakKb: number[] }> = {};
  for (const db of dbs) memory[db] = { idleKb: [], peakKb: [] };
  const allCases = cases(fixtures).filter(
    (c) => options.cases.length === 0 || options.cases.some((wanted) => c.name.includes(wanted)),
  );
  const needsGetCeiling = allCases.some((c) => c.ceiling === 'GET');
  if (allCases.some((c) => c.server === 'peer')) ensurePeerInstalled();
  for (let round = 1; round <= options.rounds; round++) {
    // The ceiling run after one case is the one before the next, when both want the same kind.
    let previous: { kind: Ceiling; figures: Figures } | undefined;
    let rateHint = 30_000;
    for (const benchCase of allCases) {
      const kind = benchCase.ceiling ?? 'POST';
      const server = benchCase.server ?? 'keygate';
      for (const db of databasesOf(server, dbs)) {
        if (previous?.kind !== kind) previous = { kind, figures: await ceilingRun(kind, options.duration) };
        const label = `r${round}-${benchCase.name.replace(/\W+/g, '-')}-${db}`;
        const figures = await runCase(benchCase, db, label, rateHint, fixtures, memory);
        const next = await ceilingRun(kind, options.duration);
        if (server === 'keygate' && benchCase.expect !== 403) rateHint = Math.max(rateHint, figures.rps);
        const run: Run = {
          ...figures,
          round,
          case: benchCase.name,
          db,
          expect: benchCase.expect,
          ceiling: kind,
          ceilingRps: (previous.figures.rps + next.rps) / 2,
          ceilingP99: (previous.figures.p99 + next.p99) / 2,
        };
        runs.push(run);
        say(
          `round ${round} ${benchCase.name} [${db}]: ${thousands(run.rps)} req/s, p50 ${fixed(run.p50)} p99 ${fixed(run.p99)} max ${fixed(run.max)} ms, non-2xx ${run.non2xx}, ÷ ceiling ${kind} ${fixed(run.rps / run.ceilingRps)} (ceiling ${thousands(run.ceilingRps)})`,
        );
        previous = { kind, figures: next };
      }
    }
    // Without a GET case in the run, one ceiling GET a round still gives the report its row.
    if (!needsGetCeiling) {
      const get = await ceilingRun('GET', options.duration);
      say(`round ${round} ceiling GET: ${thousands(get.rps)} req/s, p99 ${fixed(get.p99)} ms`);
    }
  }

  const purge = options.purge ? await measurePurge(fixtures) : undefined;
  await stop(ceiling);
  await stopBenchPostgres();

  const binaryBytes = statSync(BINARY).size;
  const report = renderReport({ runs, ceilingGets, startup, memory, purge, binaryBytes, dbs });
  say('');
  say(report);
  writeResults(report);
  writeFileSync(
    join(BENCH, '.run', `results-${new Date().toISOString().replace(/[:.]/g, '-')}.json`),
    JSON.stringify({ options, runs, ceilingGets, startup, memory, purge, binaryBytes }, null, 2),
  );
  say(`\nbench finished in ${Math.round((performance.now() - begun) / 1000)} s; wrote ${RESULTS_FILE}`);
}

// ---------------------------------------------------------------- purge under load

type Slice = Figures & { startedMs: number; endedMs: number };
type SlicePhase = 'before' | 'during' | 'after';

/** Slices of one run, summed up: the worst and the median slice max and p99, the median rate. */
type SliceSummary = {
  slices: number;
  worstMax: number;
  medianMax: number;
  worstP99: number;
  medianP99: number;
  rps: number;
};

type PurgeResult = {
  finished: boolean;
  removed: number;
  purgeMs: number;
  /** The run with the purge timer; each slice placed before, during or after the purge. */
  slices: Array<Slice & { phase: SlicePhase }>;
  /** The same create load on another copy of the same database, no purge timer, as many slices. */
  baselineSlices: Slice[];
  /** Expired keys gone from the baseline's database by its end: 0 unless a purge ran after all. */
  baselineRemoved: number;
  /** What the target compares, in words. */
  compared: string;
  during: SliceSummary;
  /** The baseline's slices at the same positions as those during the purge: as many, as far in. */
  baseline: SliceSummary;
};

const PURGE_INTERVAL_SECONDS = 4;
// The largest interval config.ts accepts: the baseline's timer would first fire a day after keygate
// starts, and the baseline lasts as long as the purge run (at most PURGE_MAX_SLICES seconds).
const NO_PURGE_INTERVAL_SECONDS = 86_400;
const PURGE_SLICE_SECONDS = 1;
const PURGE_MAX_SLICES = 75;
const PURGE_SLICES_AFTER = 4;

/**
 * Create load (via JWT) on a database holding 1M expired keys, with the purge on keygate's own timer
 * (as in production, sharing the event loop and the group commit with requests). wrk runs in
 * one-second slices so each slice's max latency can be placed before, during or after the purge.
 * Then the same load, as many slices, on another copy of the same database with the timer off: the
 * slices during the purge are compared with the baseline's at the same positions, as many of each,
 * since the worst of 72 slices against the worst of 2 would measure the count, not the purge.
 */
async function measurePurge(fixtures: Fixtures): Promise<PurgeResult> {
  say(
    `purge: ${PURGE_KEYS} expired keys, timer every ${PURGE_INTERVAL_SECONDS} s, create load in ${PURGE_SLICE_SECONDS} s slices`,
  );
  const dbPath = join(scratch, 'purge.db');
  copyFileSync(fixtures.templates.expired as string, dbPath);
  const log = join(scratch, 'purge.log');
  // The purge log line is at info; request lines are silenced here only if the run asked for it.
  const keygate = await startKeygate(dbPath, { PURGE_INTERVAL_SECONDS: String(PURGE_INTERVAL_SECONDS) }, log);
  let purgeLine: PurgeLine | undefined;
  const purgeLog = purgeLineReader(log);
  let slicesAfter = 0;
  // The slices' times count from here (createLoadInSlices starts its clock at once).
  const originWall = Date.now();
  const slices = await createLoadInSlices(keygate, fixtures, PURGE_MAX_SLICES, async () => {
    purgeLine ??= await purgeLog.next();
    if (purgeLine) slicesAfter++;
    return slicesAfter >= PURGE_SLICES_AFTER;
  });
  await stop(keygate.child);
  // How far the pass got, from the file itself (keygate only logs a pass once it is complete).
  const remaining = countExpired(dbPath);
  // The timer's first tick; keygate's log line gives the end (and the duration) once the pass is done.
  const timerFires = PURGE_INTERVAL_SECONDS * 1000;
  const purgeEnd = purgeLine ? Date.parse(purgeLine.time) - originWall : Number.POSITIVE_INFINITY;
  const purgeStart = purgeLine ? purgeEnd - purgeLine.ms : timerFires;
  const phased = slices.map((slice) => ({
    ...slice,
    phase:
      slice.endedMs <= purgeStart
        ? ('before' as const)
        : slice.startedMs >= purgeEnd
          ? ('after' as const)
          : ('during' as const),
  }));
  // The first slice of each run includes keygate's warm-up (JIT), so it is never compared.
  const positions = phased.flatMap((slice, i) => (i > 0 && slice.phase === 'during' ? [i] : []));

  say(`purge baseline: the same load, ${slices.length} slices, purge timer off`);
  const baselinePath = join(scratch, 'purge-baseline.db');
  copyFileSync(fixtures.templates.expired as string, baselinePath);
  const baselineKeygate = await startKeygate(
    baselinePath,
    { PURGE_INTERVAL_SECONDS: String(NO_PURGE_INTERVAL_SECONDS) },
    join(scratch, 'purge-baseline.log'),
  );
  const baselineSlices = await createLoadInSlices(baselineKeygate, fixtures, slices.length);
  await stop(baselineKeygate.child);
  const baselineRemoved = PURGE_KEYS - countExpired(baselinePath);

  const at = (list: Slice[]) => positions.flatMap((i) => (list[i] ? [list[i]] : []));
  const during = summarizeSlices(at(phased));
  const baseline = summarizeSlices(at(baselineSlices));
  const result: PurgeResult = {
    finished: purgeLine !== undefined,
    removed: purgeLine?.removed ?? PURGE_KEYS - remaining,
    purgeMs: purgeLine?.ms ?? slices.reduce((end, s) => Math.max(end, s.endedMs), 0) - timerFires,
    slices: phased,
    baselineSlices,
    baselineRemoved,
    compared:
      `worst of ${during.slices} 1-s slices during the purge vs worst of ${baseline.slices} 1-s slices ` +
      `of the same load without a purge timer (the same positions in a run of ${slices.length} slices)`,
    during,
    baseline,
  };
  say(
    `purge ${result.finished ? `removed ${result.removed} in` : 'had not finished after'} ${Math.round(result.purgeMs)} ms; ` +
      `${result.compared}: ${fixed(during.worstMax)} vs ${fixed(baseline.worstMax)} ms`,
  );
  return result;
}

/**
 * Create load on a running keygate in one-second wrk slices: `count` of them, or fewer if `enough`
 * (asked after each slice) says so.
 */
async function createLoadInSlices(
  keygate: Running,
  fixtures: Fixtures,
  count: number,
  enough: () => Promise<boolean> = async () => false,
): Promise<Slice[]> {
  const origin = performance.now();
  const slices: Slice[] = [];
  while (slices.length < count) {
    const startedMs = performance.now() - origin;
    const figures = await wrk(
      keygate.url,
      'create.lua',
      ['/apikeys/jwt', fixtures.bearerFile],
      PURGE_SLICE_SECONDS,
      options.connections,
    );
    slices.push({ ...figures, startedMs, endedMs: performance.now() - origin });
    if (await enough()) break;
  }
  return slices;
}

function summarizeSlices(slices: Slice[]): SliceSummary {
  return {
    slices: slices.length,
    worstMax: Math.max(...slices.map((s) => s.max)),
    medianMax: median(slices.map((s) => s.max)),
    worstP99: Math.max(...slices.map((s) => s.p99)),
    medianP99: median(slices.map((s) => s.p99)),
    rps: median(slices.map((s) => s.rps)),
  };
}

function countExpired(dbPath: string): number {
  const db = new Database(dbPath, { readonly: true });
  try {
    return (
      db.query('SELECT count(*) AS n FROM api_keys WHERE expires_at <= ?').get(Date.now()) as { n: number }
    ).n;
  } finally {
    db.close();
  }
}

type PurgeLine = { removed: number; ms: number; time: string };

/** Reads keygate's log as it grows (only the new part each time) until the first purge line. */
function purgeLineReader(log: string): { next(): Promise<PurgeLine | undefined> } {
  let offset = 0;
  let partial = '';
  return {
    async next() {
      const file = Bun.file(log);
      const size = file.size;
      if (size <= offset) return undefined;
      const lines = (partial + (await file.slice(offset, size).text())).split('\n');
      offset = size;
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.includes('"msg":"purge"')) continue;
        const entry = JSON.parse(line);
        return { removed: entry.removed, ms: entry.ms, time: entry.time };
      }
      return undefined;
    },
  };
}

// ---------------------------------------------------------------- RESULTS.md

function machineLine(): string {
  const kernel = readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim();
  return `${cpus().length} CPUs (nproc ${navigator.hardwareConcurrency}), ${cpus()[0]?.model ?? 'unknown CPU'}, Linux ${kernel}, Bun ${Bun.version}`;
}

const FAIRNESS_CASES: CaseName[] = ["fairness: another user's create", 'fairness baseline'];

/** The runs of one case on one database, every round. */
function runsOf(runs: Run[], name: CaseName, db: string): Run[] {
  return runs.filter((r) => r.case === name && r.db === db);
}

/** Each round's `ours` req/s ÷ `theirs` in the same round, in round order. */
function roundByRound(ours: Run[], theirs: Run[]): number[] {
  return ours.flatMap((run) => {
    const other = theirs.find((r) => r.round === run.round);
    return other ? [run.rps / other.rps] : [];
  });
}

/** Medians over rounds of one case on one database. */
function mediansOf(list: Run[]) {
  return {
    requests: median(list.map((r) => r.requests)),
    rps: median(list.map((r) => r.rps)),
    p50: median(list.map((r) => r.p50)),
    p99: median(list.map((r) => r.p99)),
    max: median(list.map((r) => r.max)),
    non2xx: median(list.map((r) => r.non2xx)),
    ratio: median(list.map((r) => r.rps / r.ceilingRps)),
    p99Ratio: median(list.map((r) => r.p99 / r.ceilingP99)),
    heavyRps: median(list.map((r) => r.heavyRps ?? Number.NaN)),
  };
}

/** User 2's create latency beside a heavy user (user 1 alone) and beside the same load spread out. */
function renderFairness(runs: Run[], dbs: string[]): string[] {
  const [alone, baseline] = FAIRNESS_CASES as [CaseName, CaseName];
  const group = (name: CaseName, db: string) => runsOf(runs, name, db);
  const measured = dbs.filter((db) => group(alone, db).length > 0 && group(baseline, db).length > 0);
  if (measured.length === 0) return [];
  const out: string[] = [];
  out.push(
    `Fairness: user 1 holds 100k live keys (cap raised); a heavy create-via-JWT load on ${Math.max(1, options.connections - 1)} connections ` +
      `and user 2 creating on 1 connection beside it, both wrk on CPU 1; the latencies are user 2's (medians over rounds).`,
  );
  out.push('');
  out.push(
    '| heavy load | database | heavy req/s | user 2 req/s | user 2 p50 ms | p99 ms | max ms | non-2xx |',
  );
  out.push('|---|---|---:|---:|---:|---:|---:|---:|');
  const heavyLabels: Record<string, string> = {
    [alone]: 'user 1 alone',
    [baseline]: `spread over the ${options.users} users (baseline)`,
  };
  for (const db of measured) {
    for (const name of [alone, baseline]) {
      const m = mediansOf(group(name, db));
      // wrk reports zero latencies when nothing completed; that is not a fast answer.
      const latencies =
        m.requests > 0 ? [m.p50, m.p99, m.max].map((ms) => fixed(ms)) : ['none completed', '—', '—'];
      out.push(
        `| ${heavyLabels[name]} | ${databaseLabel(db)} | ${thousands(m.heavyRps)} | ${thousands(m.rps)} | ${latencies.join(' | ')} | ${thousands(m.non2xx)} |`,
      );
    }
  }
  out.push('');
  const ratios = measured.map((db) => {
    const [a, b] = [mediansOf(group(alone, db)), mediansOf(group(baseline, db))];
    if (a.requests === 0 || b.requests === 0)
      return `${databaseLabel(db)} — (a user 2 run completed nothing)`;
    return `${databaseLabel(db)} ${fixed(a.p99 / b.p99)}`;
  });
  out.push(`User 2's p99 beside user 1 alone ÷ beside the spread load: ${ratios.join('; ')}.`);
  return out;
}

/** keygate beside better-auth's api-key plugin: create and verify, same wrk settings, same core. */
function renderPeer(runs: Run[]): string[] {
  const pairs: Array<[string, CaseName, CaseName]> = [
    ['create', 'create via JWT', 'peer create (better-auth)'],
    ['verify', 'verify (key)', 'peer verify (better-auth)'],
  ];
  const group = (name: CaseName, db: string) => runsOf(runs, name, db);
  const measured = pairs.filter(
    ([, ours, peer]) => group(ours, 'empty').length > 0 && group(peer, OWN_DATABASE).length > 0,
  );
  if (measured.length === 0) return [];
  const versions = JSON.parse(readFileSync(join(PEER, 'package.json'), 'utf8')).dependencies as Record<
    string,
    string
  >;
  const out: string[] = [];
  out.push(
    `Beside better-auth ${versions['better-auth']} with @better-auth/api-key ${versions['@better-auth/api-key']} (bench/peer: Elysia, bun:sqlite WAL, synchronous=FULL, rate limit off), ` +
      `pinned to CPU 0 with its own database file, same wrk settings. keygate's rows are its empty SQLite database. ` +
      `The peer's create takes the user id in the body (no caller authentication); keygate's verifies a JWT. ` +
      `The peer's verify also writes the key's lastRequest (one UPDATE, its own fsync, on every call, even with rate limits off). ` +
      (peerKeys
        ? `The peer's verify rotates over ${thousands(peerKeys.used)} keys created through its own API before each run (in the first round ${thousands(peerKeys.created)} made in ${fixed(peerKeys.ms / 1000, 1)} s)` +
          `${peerKeys.used < PEER_VERIFY_KEYS ? `, fewer than keygate's ${thousands(options.verifyKeys)} because ${thousands(PEER_VERIFY_KEYS)} took longer than ${PEER_PREPARE_MS / 1000} s` : ''}.`
        : ''),
  );
  out.push('');
  out.push(
    '| operation | keygate case | keygate req/s | p99 ms | better-auth req/s | p99 ms | keygate ÷ better-auth req/s |',
  );
  out.push('|---|---|---:|---:|---:|---:|---:|');
  for (const [operation, ours, peer] of measured) {
    const a = mediansOf(group(ours, 'empty'));
    const b = mediansOf(group(peer, OWN_DATABASE));
    out.push(
      `| ${operation} | ${ours} | ${thousands(a.rps)} | ${fixed(a.p99)} | ${thousands(b.rps)} | ${fixed(b.p99)} | ${fixed(a.rps / b.rps)} |`,
    );
  }
  return out;
}

/** A measured figure, how it reads in the table, and whether it meets its target. */
type TargetFigure = { text: string; met: boolean } | { missing: string } | { context: string };

/** Issue 10's targets, one row each, from this run's medians (SQLite rows only). */
function renderTargets(runs: Run[], purge: PurgeResult | undefined): string[] {
  const sqlite = (name: CaseName, db: 'empty' | 'seeded' | typeof OWN_DATABASE) => {
    const list = runsOf(runs, name, db);
    return list.length > 0 ? mediansOf(list) : undefined;
  };
  const bigTable = options.seed >= 1_000_000;
  const notRun = (what: string) => ({ missing: `not measured in this run (needs ${what})` });
  const needsSeed = notRun('--seed 1000000');

  const oneUser = (): TargetFigure => {
    const held = sqlite('create by one user (100k keys)', 'empty');
    const none = sqlite('create by one user (0 keys)', 'empty');
    if (!held || !none) return notRun('the create by one user (0 keys) and (100k keys) cases');
    const ratio = held.rps / none.rps;
    return { text: fixed(ratio), met: ratio >= 0.9 };
  };
  const withMillion = (): TargetFigure => {
    if (!bigTable) return needsSeed;
    const names: CaseName[] = ['create via JWT', 'create via key', 'delete via JWT', 'delete via key'];
    const ratios = names.flatMap((name) => {
      const [big, empty] = [sqlite(name, 'seeded'), sqlite(name, 'empty')];
      return big && empty ? [{ name, ratio: big.rps / empty.rps }] : [];
    });
    if (ratios.length === 0) return notRun('the create and delete cases');
    ratios.sort((a, b) => a.ratio - b.ratio);
    const worst = ratios[0] as { name: CaseName; ratio: number };
    const others = ratios.slice(1).map((r) => `${r.name} ${fixed(r.ratio)}`);
    return {
      text: `${fixed(worst.ratio)} (worst: ${worst.name}${others.length > 0 ? `; ${others.join(', ')}` : ''})`,
      met: worst.ratio >= 0.9,
    };
  };
  const toCeiling = (name: CaseName): TargetFigure => {
    if (!bigTable) return needsSeed;
    if (options.verifyKeys < 10_000) return notRun('--verify-keys 10000');
    const big = sqlite(name, 'seeded');
    if (!big) return notRun(`the ${name} case`);
    return { text: fixed(big.ratio), met: big.ratio >= 0.7 };
  };
  const floor = (): TargetFigure => {
    const [create, durable] = [sqlite('create via JWT', 'empty'), sqlite('durable floor', OWN_DATABASE)];
    if (!create || !durable) return notRun('the create via JWT and durable floor cases');
    const ratio = create.rps / durable.rps;
    // Each round's two runs are ~20 s apart, the rounds minutes: what each round's pair gave.
    const rounds = roundByRound(
      runsOf(runs, 'create via JWT', 'empty'),
      runsOf(runs, 'durable floor', OWN_DATABASE),
    );
    return {
      text: `${fixed(ratio)} (${thousands(create.rps)} ÷ ${thousands(durable.rps)} req/s; by round ${rounds.map((r) => fixed(r)).join(', ')}, median ${fixed(median(rounds))})`,
      met: ratio >= 0.9,
    };
  };
  /** Create via JWT ÷ the durable floor doing a create's duties, and that floor ÷ the bare one. */
  const overDutiesFloor = (): TargetFigure => {
    const [create, durable] = [sqlite('create via JWT', 'empty'), sqlite('durable floor', OWN_DATABASE)];
    const duties = sqlite('durable floor + duties', 'empty');
    if (!create || !durable || !duties) {
      return notRun('the create via JWT, durable floor and durable floor + duties cases');
    }
    return {
      context: `${fixed(create.rps / duties.rps)}; the floor with duties itself ÷ the durable floor ${fixed(duties.rps / durable.rps)}`,
    };
  };
  const purgeAdded = (): TargetFigure => {
    if (!purge) return notRun('--purge');
    const [during, baseline] = [purge.during, purge.baseline];
    if (during.slices === 0 || baseline.slices === 0) {
      return { missing: 'no load slice fell during the purge' };
    }
    const added = during.worstMax - baseline.worstMax;
    const unfinished = purge.finished ? '' : '; the purge had NOT finished';
    return {
      text: `${fixed(added)} ms (${fixed(during.worstMax)} − ${fixed(baseline.worstMax)}: ${purge.compared}${unfinished})`,
      met: added <= 10,
    };
  };
  const worstP99 = (): TargetFigure => {
    const excluded: CaseName[] = [
      ...FAIRNESS_CASES,
      'durable floor',
      "durable floor on keygate's file",
      'durable floor + duties',
      'verify floor',
      'forward-auth floor',
      'verify floor + duties',
      'forward-auth floor + duties',
      'peer create (better-auth)',
      'peer verify (better-auth)',
    ];
    const rows = [...new Set(runs.map((r) => r.case))]
      .filter((name) => !excluded.includes(name))
      .flatMap((name) =>
        (['empty', 'seeded'] as const).flatMap((db) => {
          const m = sqlite(name, db);
          return m ? [{ name, db, ratio: m.p99Ratio }] : [];
        }),
      );
    if (rows.length === 0) return notRun('a keygate case');
    const worst = rows.reduce((a, b) => (b.ratio > a.ratio ? b : a));
    return {
      text: `${fixed(worst.ratio)} (${worst.name}, ${databaseLabel(worst.db)})`,
      met: worst.ratio <= 3,
    };
  };

  const fileFloor: CaseName = "durable floor on keygate's file";
  /** The durable floor on keygate's file with 1M keys ÷ on the empty one: what the size alone costs. */
  const floorWithMillion = (): TargetFigure => {
    if (!bigTable) return needsSeed;
    const [big, empty] = [sqlite(fileFloor, 'seeded'), sqlite(fileFloor, 'empty')];
    if (!big || !empty) return notRun(`the ${fileFloor} case`);
    return {
      context: `${fixed(big.rps / empty.rps)} (${thousands(big.rps)} ÷ ${thousands(empty.rps)} req/s)`,
    };
  };
  /** The least p99 a durable write had in this run: the durable floors' own, ÷ their ceiling's. */
  const floorP99 = (): TargetFigure => {
    const figures = [
      ['its own file', sqlite('durable floor', OWN_DATABASE)],
      ["keygate's empty file", sqlite(fileFloor, 'empty')],
      ["keygate's file with 1M keys", sqlite(fileFloor, 'seeded')],
    ] as const;
    const measured = figures.flatMap(([where, m]) => (m ? [`${fixed(m.p99Ratio)} (${where})`] : []));
    if (measured.length === 0) return notRun('the durable floor cases');
    return { context: measured.join(', ') };
  };

  /** keygate's case ÷ the floor of the same work on the same framework (what keygate's layers cost). */
  const overFloor = (name: CaseName, floorName: CaseName): TargetFigure => {
    const [ours, floorRun] = [sqlite(name, bigTable ? 'seeded' : 'empty'), sqlite(floorName, OWN_DATABASE)];
    if (!ours || !floorRun) return notRun(`the ${name} and ${floorName} cases`);
    return {
      context: `${fixed(ours.rps / floorRun.rps)}; the floor itself ÷ its ceiling ${fixed(floorRun.ratio)}`,
    };
  };

  const rows: Array<[string, TargetFigure, string]> = [
    ['create by one user holding 100k live keys ÷ by a user holding none', oneUser(), '≥ 0.9'],
    ['create and delete with 1M live keys ÷ empty database', withMillion(), '≥ 0.9'],
    ["  context: durable floor on keygate's file, 1M live keys ÷ empty", floorWithMillion(), ''],
    ['verify (key) ÷ ceiling POST, 1M live keys, 10k distinct keys', toCeiling('verify (key)'), '≥ 0.7'],
    ['forward-auth (key) ÷ ceiling GET, same conditions', toCeiling('forward-auth (key)'), '≥ 0.7'],
    ['  context: verify (key) ÷ verify floor', overFloor('verify (key)', 'verify floor'), ''],
    [
      "  context: verify (key) ÷ verify floor with keygate's duties",
      overFloor('verify (key)', 'verify floor + duties'),
      '',
    ],
    [
      '  context: forward-auth (key) ÷ forward-auth floor',
      overFloor('forward-auth (key)', 'forward-auth floor'),
      '',
    ],
    [
      "  context: forward-auth (key) ÷ forward-auth floor with keygate's duties",
      overFloor('forward-auth (key)', 'forward-auth floor + duties'),
      '',
    ],
    ['create via JWT ÷ durable floor (same run)', floor(), '≥ 0.9'],
    ["  context: create via JWT ÷ durable floor with keygate's duties", overDutiesFloor(), ''],
    [
      'added max latency while purging 1M expired keys under create load (worst slice max − the same without a purge timer)',
      purgeAdded(),
      '≤ 10 ms',
    ],
    ["worst case's p99 ÷ its ceiling p99", worstP99(), '≤ 3'],
    ["  context: the durable floors' p99 ÷ their ceiling p99", floorP99(), ''],
  ];
  const out: string[] = [];
  out.push('### Targets (issue 10)');
  out.push('');
  out.push(
    'From the medians above, SQLite rows only: the p99 row leaves out the PostgreSQL rows, the floors, the peer and the fairness cases.',
  );
  out.push('');
  out.push('| figure | this run | target | |');
  out.push('|---|---|---|---|');
  for (const [figure, value, target] of rows) {
    const [text, verdict] =
      'missing' in value
        ? [value.missing, '—']
        : 'context' in value
          ? [value.context, '']
          : [value.text, value.met ? 'met' : 'not met'];
    out.push(`| ${figure} | ${text} | ${target} | ${verdict} |`);
  }
  return out;
}

function renderReport(input: {
  runs: Run[];
  ceilingGets: Figures[];
  startup: { medianMs: number; minMs: number; maxMs: number };
  memory: Record<string, { idleKb: number[]; peakKb: number[] }>;
  purge: PurgeResult | undefined;
  binaryBytes: number;
  dbs: string[];
}): string {
  const { runs, dbs } = input;
  const out: string[] = [];
  out.push(`Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC — ${machineLine()}`);
  out.push('');
  out.push(
    `keygate (compiled, synchronous=FULL, LOG_LEVEL=${options.logLevel} to a file) and the ceiling on CPU 0, wrk -t1 -c${options.connections} on CPU 1; ` +
      `${options.rounds} rounds of ${options.duration} s per case after ${options.warmup} s warm-up, fresh keygate and database per case; medians over rounds. ` +
      `Ratios are to the mean of the two ceiling runs around each keygate run: ${ceilingNote(runs)}. ` +
      `${options.users} users (tokens / caller keys) in rotation; verify and forward-auth rotate over ${thousands(options.verifyKeys)} other distinct keys, seeded in every database; MAX_KEYS_PER_USER default.`,
  );
  out.push('');
  out.push(
    '| case | database | req/s | p50 ms | p99 ms | max ms | non-2xx | ÷ ceiling req/s | p99 ÷ ceiling p99 |',
  );
  out.push('|---|---|---:|---:|---:|---:|---:|---:|---:|');
  // The fairness cases' figures are another user's, beside a heavy load: they get their own table.
  const names = [...new Set(runs.map((r) => r.case))].filter((name) => !FAIRNESS_CASES.includes(name));
  const group = (name: CaseName, db: string) => runsOf(runs, name, db);
  for (const name of names) {
    for (const db of [...dbs, OWN_DATABASE]) {
      if (group(name, db).length === 0) continue;
      const m = mediansOf(group(name, db));
      const dbLabel = databaseLabel(db);
      out.push(
        `| ${name} | ${dbLabel} | ${thousands(m.rps)} | ${fixed(m.p50)} | ${fixed(m.p99)} | ${fixed(m.max)} | ${thousands(m.non2xx)} | ${fixed(m.ratio)} | ${fixed(m.p99Ratio)} |`,
      );
    }
  }
  const postCeilings = runs.filter((r) => r.ceiling === 'POST');
  out.push(
    `| ceiling POST | — | ${thousands(median(postCeilings.map((r) => r.ceilingRps)))} | | ${fixed(median(postCeilings.map((r) => r.ceilingP99)))} | | | 1.00 | 1.00 |`,
  );
  const gets = input.ceilingGets;
  out.push(
    `| ceiling GET | — | ${thousands(median(gets.map((g) => g.rps)))} | ${fixed(median(gets.map((g) => g.p50)))} | ${fixed(median(gets.map((g) => g.p99)))} | ${fixed(median(gets.map((g) => g.max)))} | ${median(gets.map((g) => g.non2xx))} | | |`,
  );
  out.push('');
  out.push(
    'non-2xx of the 403 case is every request (expected); elsewhere it should be 0. The delete cases seed their keys to delete ' +
      '(1.5 × the larger of 30k/s and the round\'s best create rate × the run time, owned round-robin by the users) before keygate starts, so their "empty" database holds those.',
  );
  out.push('', ...renderTargets(runs, input.purge));
  if (dbs.includes('seeded')) {
    out.push('');
    out.push(
      `With ${thousands(options.seed)} live keys ÷ empty (medians; req/s wants ≥ 0.9, latencies ≤ 1.11):`,
    );
    out.push('');
    out.push('| case | req/s | p50 | p99 | max |');
    out.push('|---|---:|---:|---:|---:|');
    for (const name of names.filter((n) => group(n, 'seeded').length > 0)) {
      const a = mediansOf(group(name, 'seeded'));
      const b = mediansOf(group(name, 'empty'));
      out.push(
        `| ${name} | ${fixed(a.rps / b.rps)} | ${fixed(a.p50 / b.p50)} | ${fixed(a.p99 / b.p99)} | ${fixed(a.max / b.max)} |`,
      );
    }
  }
  const fairness = renderFairness(runs, dbs);
  if (fairness.length > 0) out.push('', ...fairness);
  const peer = renderPeer(runs);
  if (peer.length > 0) out.push('', ...peer);
  if (input.purge) {
    const p = input.purge;
    const [during, baseline] = [p.during, p.baseline];
    const count = (phase: SlicePhase) => p.slices.filter((s) => s.phase === phase).length;
    out.push('');
    out.push(
      (p.finished
        ? `Purge: ${thousands(p.removed)} expired keys removed by keygate's own timer in ${thousands(p.purgeMs)} ms under create-via-JWT load `
        : `Purge: keygate's own timer had NOT finished: ${thousands(p.removed)} of ${thousands(PURGE_KEYS)} expired keys removed after ${thousands(p.purgeMs)} ms of create-via-JWT load `) +
        `(1-s slices: ${count('before')} before, ${count('during')} during, ${count('after')} after). ` +
        `Baseline: the same load for as many slices on another copy of the same database, purge timer off (PURGE_INTERVAL_SECONDS=${NO_PURGE_INTERVAL_SECONDS}; ${thousands(p.baselineRemoved)} keys removed); ` +
        `its slices at the same positions as those during the purge, ${baseline.slices} of them, beside the ${during.slices} during (neither run's first slice, keygate's warm-up). ` +
        `During vs baseline: worst slice max ${fixed(during.worstMax)} vs ${fixed(baseline.worstMax)} ms; median slice max ${fixed(during.medianMax)} vs ${fixed(baseline.medianMax)} ms; ` +
        `slice p99 worst ${fixed(during.worstP99)} vs ${fixed(baseline.worstP99)} ms, median ${fixed(during.medianP99)} vs ${fixed(baseline.medianP99)} ms; median req/s ${thousands(during.rps)} vs ${thousands(baseline.rps)}.`,
    );
  }
  out.push('');
  const mb = (kb: number) => `${fixed(kb / 1024, 1)} MB`;
  const memoryLine = Object.entries(input.memory)
    .map(([db, m]) => `${db}: idle ${mb(median(m.idleKb))}, peak ${mb(Math.max(...m.peakKb))}`)
    .join('; ');
  out.push(
    `Start-up (process start to first /health 200, fresh database, median of ${options.startups}): ${fixed(input.startup.medianMs, 1)} ms ` +
      `(min ${fixed(input.startup.minMs, 1)}, max ${fixed(input.startup.maxMs, 1)}). Binary ${fixed(input.binaryBytes / 1e6, 1)} MB. RSS ${memoryLine}.`,
  );
  return out.join('\n');
}

const DATABASE_LABELS: Record<string, string> = {
  empty: 'empty',
  postgres: 'empty, PostgreSQL',
  [OWN_DATABASE]: 'its own SQLite file',
};

function databaseLabel(db: string): string {
  return DATABASE_LABELS[db] ?? `${thousands(options.seed)} keys`;
}

/** Which ceiling each case's ratio is to, for the report's opening paragraph. */
function ceilingNote(runs: Run[]): string {
  const onGet = [...new Set(runs.filter((r) => r.ceiling === 'GET').map((r) => r.case))];
  return onGet.length === 0
    ? 'ceiling POST'
    : `ceiling GET for ${onGet.join(', ')}, ceiling POST for the rest`;
}

function writeResults(report: string): void {
  const previous = existsSync(RESULTS_FILE) ? readFileSync(RESULTS_FILE, 'utf8') : '';
  const historyAt = previous.indexOf(HISTORY_HEADING);
  const history = historyAt === -1 ? `${HISTORY_HEADING}\n\n(none yet)\n` : previous.slice(historyAt);
  writeFileSync(
    RESULTS_FILE,
    `# keygate load benchmark\n\nWritten by \`bun run bench\` (bench/run.ts); the History section below is kept between runs.\n\n## Latest run\n\n${report}\n\n${history}`,
  );
}

main()
  .catch((error: unknown) => {
    process.stderr.write(`bench: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exitCode = 1;
  })
  .finally(() => {
    cleanUp();
    process.exit();
  });
