// The bench's driver: starts keygate and its yardsticks pinned to the server's CPU, drives them with
// wrk pinned to the load's CPU, collects the figures and stops what it started (and only that).
import { Database } from 'bun:sqlite';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { join } from 'node:path';
import { SQL, type Subprocess } from 'bun';
import { openPostgres } from '../src/db/postgres/open';
import { startPostgres, type ThrowawayPostgres } from '../test/support/postgres';
import { type Case, type Fixtures, type Load, OWN_DATABASE, PEER_DIR, type Server } from './cases';
import { type Figures, type Memory, median, type Startup } from './figures';
import type { Options } from './options';

export const SERVER_CPU = '0';
export const LOAD_CPU = '1';
const LUA = join(import.meta.dir, 'lua');

/** A throwaway PostgreSQL (--postgres) and a connection to its maintenance database. */
export type BenchPostgres = { server: ThrowawayPostgres; admin: SQL };

/** What every started server and run needs to know of this bench run. */
export type Bench = {
  options: Options;
  jwtSecret: string;
  /** The run's scratch directory: databases, logs, the load files; removed at the end. */
  scratch: string;
  /** The run's own copy of dist/keygate, so a rebuild by someone else mid-run changes nothing. */
  binary: string;
  /** The bench's own build (bench/keygate-entry.ts), when a case runs on it. */
  benchBinary?: string;
  /** --baseline: the commit's own build, which the A/B cases also run on. */
  baseline?: Baseline;
  postgres?: BenchPostgres;
};

export function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

// ---------------------------------------------------------------- processes we started, and only those

const children = new Set<Subprocess>();

export function start(command: string[], options: { env?: Record<string, string>; stdout?: string } = {}) {
  const child = Bun.spawn(command, {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...options.env },
    stdout: options.stdout ? Bun.file(options.stdout) : 'pipe',
    stderr: 'pipe',
  });
  children.add(child);
  child.exited.then(() => children.delete(child));
  return child;
}

export async function stop(child: Subprocess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const exited = await Promise.race([child.exited.then(() => true), Bun.sleep(graceMs).then(() => false)]);
  if (!exited) {
    child.kill('SIGKILL');
    await child.exited;
  }
}

/** Kills every process still running that the bench started, and removes the scratch directory. */
export function cleanUp(scratch: string): void {
  for (const child of children) child.kill('SIGKILL');
  if (scratch) rmSync(scratch, { recursive: true, force: true });
}

// ---------------------------------------------------------------- wrk

/**
 * `secondPort`: two replicas; wrk runs two threads, the second sending to that port (bench/lua/report.lua),
 * so each key's requests are spread over both.
 */
export async function wrk(
  url: string,
  script: string,
  args: string[],
  seconds: number,
  connections: number,
  secondPort?: number,
) {
  const child = start(
    [
      'taskset',
      '-c',
      LOAD_CPU,
      'wrk',
      secondPort === undefined ? '-t1' : '-t2',
      `-c${connections}`,
      `-d${seconds}s`,
      '-s',
      join(LUA, script),
      url,
      '--',
      ...args,
    ],
    { env: secondPort === undefined ? {} : { BENCH_SECOND_PORT: String(secondPort) } },
  );
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

// ---------------------------------------------------------------- keygate, the ceiling and the yardsticks

export function freePort(): number {
  const listener = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

export async function waitFor200(url: string, deadlineMs: number): Promise<void> {
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

/** A started server; `second`: the other replica of a two-replica case, on the same database. */
export type Running = {
  child: Subprocess;
  url: string;
  log: string;
  second?: { child: Subprocess; port: number };
};

export async function startKeygate(
  bench: Bench,
  dbPath: string,
  env: Record<string, string>,
  log: string,
  binary = bench.binary,
): Promise<Running> {
  const { options } = bench;
  const port = freePort();
  const child = start(['taskset', '-c', SERVER_CPU, binary, 'serve'], {
    env: {
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: dbPath,
      JWT_SECRET: bench.jwtSecret,
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

/**
 * A yardstick from source (`bun <script> <port> ...args`), pinned like keygate; resolves once it
 * answers. The durable floor (its database under the scratch dir, or a copy of keygate's, with or
 * without a create's duties), the verify floor with or without keygate's per-answer duties (the keys
 * of a database file) and the peer (better-auth, which migrates and adds its 1000 users first).
 */
async function startYardstick(
  bench: Bench,
  server: Exclude<Server, 'keygate'>,
  dbPath: string,
  log: string,
): Promise<Running> {
  const here = import.meta.dir;
  const [script, args, waitMs] = {
    floor: [join(here, 'durable-floor.ts'), ['full'], 10_000],
    'file-floor': [join(here, 'durable-floor.ts'), ['full', dbPath], 10_000],
    'create-duties-floor': [join(here, 'durable-floor.ts'), ['full', dbPath, 'duties'], 10_000],
    'verify-floor': [join(here, 'verify-floor.ts'), [dbPath], 10_000],
    'duties-floor': [join(here, 'verify-floor.ts'), [dbPath, 'duties'], 10_000],
    peer: [join(PEER_DIR, 'server.ts'), [dbPath], 30_000],
  }[server] as [string, string[], number];
  const port = freePort();
  const child = start(['taskset', '-c', SERVER_CPU, 'bun', script, String(port), ...args], {
    // The durable floor makes its database in a fresh directory under the temporary directory; with
    // keygate's duties it checks the load's tokens.
    env: { TMPDIR: bench.scratch, JWT_SECRET: bench.jwtSecret },
    stdout: log,
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForAnswer(url, waitMs);
  return { child, url, log };
}

/** The peer has its own package.json; its dependencies are installed on first use. */
export function ensurePeerInstalled(): void {
  if (existsSync(join(PEER_DIR, 'node_modules'))) return;
  say('bench/peer: bun install --frozen-lockfile ...');
  const install = Bun.spawnSync(['bun', 'install', '--frozen-lockfile'], {
    cwd: PEER_DIR,
    stdout: 'inherit',
    stderr: 'inherit',
  });
  if (install.exitCode !== 0) throw new Error('bun install in bench/peer failed');
}

function memoryOf(pid: number): { rssKb: number; hwmKb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return { rssKb: field('VmRSS'), hwmKb: field('VmHWM') };
}

// ---------------------------------------------------------------- the baseline's build (--baseline)

/** A commit's own binary: `commit` as given, `hash` what it resolved to. */
export type Baseline = { commit: string; hash: string; binary: string };

/**
 * Builds `commit` as it was: a temporary `git worktree` of it (under the scratch directory, removed
 * once built), its own `bun install --frozen-lockfile` and `bun run build`; its binary is copied into
 * the scratch directory.
 */
export function buildBaseline(root: string, commit: string, scratch: string): Baseline {
  const git = (args: string[], cwd = root) => {
    const run = Bun.spawnSync(['git', ...args], { cwd, stderr: 'pipe' });
    if (run.exitCode !== 0) throw new Error(`git ${args.join(' ')}: ${run.stderr.toString().trim()}`);
    return run.stdout.toString().trim();
  };
  const hash = git(['rev-parse', '--short=7', '--verify', `${commit}^{commit}`]);
  const worktree = join(scratch, 'baseline-src');
  git(['worktree', 'add', '--detach', worktree, hash]);
  try {
    for (const command of [
      ['bun', 'install', '--frozen-lockfile'],
      ['bun', 'run', 'build'],
    ]) {
      say(`baseline ${hash}: ${command.join(' ')} ...`);
      const run = Bun.spawnSync(command, { cwd: worktree, stdout: 'inherit', stderr: 'inherit' });
      if (run.exitCode !== 0) throw new Error(`baseline ${hash}: ${command.join(' ')} failed`);
    }
    const binary = join(scratch, 'keygate-baseline');
    copyFileSync(join(worktree, 'dist', 'keygate'), binary);
    chmodSync(binary, 0o755);
    return { commit, hash, binary };
  } finally {
    git(['worktree', 'remove', '--force', worktree]);
  }
}

/**
 * Replaces the SQLite file at `dbPath` (in this build's schema) with one of the baseline's own schema,
 * made by its own `keygate migrate`, holding the same keys: the columns both schemas have are copied,
 * the baseline's others take their defaults (the keys here are plain: no limit, credits or permissions).
 */
export function toBaselineSchema(binary: string, dbPath: string): void {
  const source = new Database(dbPath, { readonly: true });
  const rows = source.query('SELECT * FROM api_keys').all() as Array<Record<string, unknown>>;
  source.close();
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${dbPath}${suffix}`, { force: true });
  const migrate = Bun.spawnSync([binary, 'migrate'], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DATABASE_URL: dbPath },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  if (migrate.exitCode !== 0) throw new Error(`the baseline's migrate failed: ${migrate.stderr.toString()}`);
  const target = new Database(dbPath);
  const theirs = target.query("SELECT name FROM pragma_table_info('api_keys')").all() as Array<{
    name: string;
  }>;
  const columns = theirs
    .map((column) => column.name)
    .filter((name) => rows[0] !== undefined && name in rows[0]);
  const insert = target.prepare(
    `INSERT INTO api_keys (${columns.map((name) => `"${name}"`).join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`,
  );
  target.transaction(() => {
    for (const row of rows)
      insert.run(...(columns.map((name) => row[name]) as Array<string | number | null>));
  })();
  insert.finalize();
  target.run('PRAGMA wal_checkpoint(TRUNCATE)');
  target.close();
}

// ---------------------------------------------------------------- PostgreSQL (--postgres)

const PG_TEMPLATE = 'bench_template';

/** A throwaway PostgreSQL pinned to the server's CPU, and a migrated, empty template database. */
export async function startBenchPostgres(): Promise<BenchPostgres> {
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
  say(`PostgreSQL ${server.url} (pinned to CPU ${SERVER_CPU}, synchronous_commit on)`);
  return { server, admin: new SQL(server.url.replace(/\/keygate$/, '/postgres'), { max: 1 }) };
}

export async function stopBenchPostgres(postgres: BenchPostgres | undefined): Promise<void> {
  if (!postgres) return;
  await postgres.admin.close();
  postgres.server.destroy();
}

/** A fresh PostgreSQL database holding the rows of the SQLite file a case prepared; its URL. */
async function toPostgres(
  postgres: BenchPostgres | undefined,
  dbPath: string,
  label: string,
): Promise<string> {
  if (!postgres) throw new Error('PostgreSQL is not started');
  const name = `bench_${label.replace(/\W+/g, '_').toLowerCase()}`;
  await postgres.admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${PG_TEMPLATE}`);
  const url = postgres.server.url.replace(/\/keygate$/, `/${name}`);
  const source = new Database(dbPath, { readonly: true });
  const rows = source
    .query(
      'SELECT id, secret_hash, user_id, level, name, created_at, expires_at, ratelimit_limit, ratelimit_duration FROM api_keys',
    )
    .all() as Array<Record<string, unknown> & { secret_hash: Uint8Array }>;
  const credits = source
    .query('SELECT lineage, remaining, refill_amount, refill_interval_ms, refilled_at FROM key_credits')
    .all() as Array<Record<string, unknown>>;
  source.close();
  const target = new SQL(url, { max: 1 });
  for (let i = 0; i < rows.length; i += 5000) {
    const batch = rows
      .slice(i, i + 5000)
      .map((row) => ({ ...row, secret_hash: Buffer.from(row.secret_hash).toString('hex') }));
    await target`INSERT INTO api_keys ${target(batch)}`;
  }
  for (let i = 0; i < credits.length; i += 5000) {
    await target`INSERT INTO key_credits ${target(credits.slice(i, i + 5000))}`;
  }
  await target.close();
  return url;
}

async function dropPostgres(postgres: BenchPostgres | undefined, url: string): Promise<void> {
  await postgres?.admin.unsafe(`DROP DATABASE IF EXISTS ${new URL(url).pathname.slice(1)}`);
}

// ---------------------------------------------------------------- one case on one database

/** Starts the case's server on a fresh database, warms it up, measures, stops it; keygate's RSS into `memory`. */
export async function runCase(
  bench: Bench,
  benchCase: Case,
  db: string,
  label: string,
  rateHint: number,
  fixtures: Fixtures,
  memory: Memory,
  onBaseline = false,
): Promise<Figures & { heavyRps?: number }> {
  const { options, scratch } = bench;
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
  if (onBaseline) {
    if (bench.baseline === undefined || db !== 'empty')
      throw new Error('the baseline runs on the empty SQLite database');
    toBaselineSchema(bench.baseline.binary, dbPath);
  }
  if (db !== OWN_DATABASE || benchCase.seed !== undefined) onDisk(dbPath);
  const warm = benchCase.load(dbPath, options.warmup, `${label}-warm`, rateHint);
  const measured = benchCase.load(dbPath, options.duration, label, rateHint);
  const databaseUrl = db === 'postgres' ? await toPostgres(bench.postgres, dbPath, label) : dbPath;
  const binary = onBaseline
    ? bench.baseline?.binary
    : benchCase.build === 'bench'
      ? bench.benchBinary
      : bench.binary;
  if (binary === undefined) throw new Error(`${benchCase.name} needs the bench's own build`);
  const running =
    server === 'keygate'
      ? await startKeygate(bench, databaseUrl, benchCase.env ?? {}, log, binary)
      : await startYardstick(bench, server, dbPath, log);
  if (benchCase.replicas === 2) {
    const other = await startKeygate(bench, databaseUrl, benchCase.env ?? {}, `${log}-2`, binary);
    running.second = { child: other.child, port: Number(new URL(other.url).port) };
  }
  await benchCase.prepare?.(running.url, dbPath);
  // The baseline's schema and ids must be its own: a key it cannot find would be measured as fast.
  if (onBaseline) await expectValidKey(running.url, fixtures.verifyKeyFile);
  const idle = memoryOf(running.child.pid);
  if (benchCase.primes) {
    const urls = [running.url, ...(running.second ? [`http://127.0.0.1:${running.second.port}`] : [])];
    for (const url of urls) await primeKeyCache(url, benchCase.primes(dbPath));
  }
  await drive(options, running, warm, options.warmup);
  const { figures, heavy } = await drive(options, running, measured, options.duration);
  const peak = memoryOf(running.child.pid);
  await stop(running.child);
  if (running.second) await stop(running.second.child);
  rmSync(dbPath, { force: true });
  rmSync(`${dbPath}-wal`, { force: true });
  rmSync(`${dbPath}-shm`, { force: true });
  rmSync(log, { force: true });
  rmSync(`${log}-2`, { force: true });
  if (db === 'postgres') await dropPostgres(bench.postgres, databaseUrl);
  if (server === 'keygate' && !onBaseline) {
    memory[db]?.idleKb.push(idle.rssKb);
    memory[db]?.peakKb.push(peak.hwmKb);
  }
  return { ...figures, heavyRps: heavy?.rps };
}

/**
 * Writes a database file just copied or seeded to the disk before a server opens it. Otherwise the
 * kernel may still be writing its pages back while the case runs (a file with 500k keys is 115 MB),
 * and every commit's fsync waits behind them: the case would measure the copy, not keygate.
 */
function onDisk(path: string): void {
  const fd = openSync(path, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Checks that the first verify body of the file answers VALID. */
async function expectValidKey(url: string, bodiesFile: string): Promise<void> {
  const body = readFileSync(bodiesFile, 'utf8').split('\n')[0] as string;
  const response = await fetch(`${url}/apikeys/verify`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body,
  });
  const answer = await response.text();
  if (response.status !== 200 || !answer.includes('"code":"VALID"')) {
    throw new Error(`a plain key's verify on the baseline answered ${response.status} ${answer}`);
  }
}

/** Sends each verify body of the file once, 32 at a time, so every key is in the server's key cache. */
async function primeKeyCache(url: string, bodiesFile: string): Promise<void> {
  const bodies = readFileSync(bodiesFile, 'utf8').split('\n').filter(Boolean);
  let next = 0;
  const sender = async () => {
    while (next < bodies.length) {
      const response = await fetch(`${url}/apikeys/verify`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: bodies[next++],
      });
      await response.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: 32 }, sender));
}

/** Runs a case's load; with a light load beside it, both wrk processes at once on the load CPU. */
async function drive(
  options: Options,
  running: Running,
  load: Load,
  seconds: number,
): Promise<{ figures: Figures; heavy?: Figures }> {
  const { url } = running;
  if (!load.light) {
    return {
      figures: await wrk(url, load.script, load.args, seconds, options.connections, running.second?.port),
    };
  }
  const [heavy, light] = await Promise.all([
    wrk(url, load.script, load.args, seconds, Math.max(1, options.connections - 1)),
    wrk(url, load.light.script, load.light.args, seconds, 1),
  ]);
  return { figures: light, heavy };
}

// ---------------------------------------------------------------- start-up time

export async function measureStartup(bench: Bench): Promise<Startup> {
  const { options, scratch } = bench;
  const times: number[] = [];
  for (let i = 0; i < options.startups; i++) {
    const dir = join(scratch, `startup-${i}`);
    mkdirSync(dir);
    const port = freePort();
    const started = performance.now();
    const child = start(['taskset', '-c', SERVER_CPU, bench.binary, 'serve'], {
      env: {
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_URL: join(dir, 'keygate.db'),
        JWT_SECRET: bench.jwtSecret,
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
