// A throwaway PostgreSQL for tests: Debian's server (installed here when missing and we are root),
// `initdb` as an unprivileged user in a temporary directory, 127.0.0.1 on a free port, and stopped by
// pg_ctl (which signals the postmaster it started, by the PID in its postmaster.pid) afterwards.
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SQL } from 'bun';
import { openPostgres } from '../../src/db/postgres/open';
import { ensureDebianPackages } from './debian-packages';

export type ThrowawayPostgres = {
  /** `postgres://…` for the database `keygate`. */
  url: string;
  port: number;
  /** The postmaster's PID while it runs. */
  pid(): number;
  /** A fresh, empty database on the same server; its URL. */
  createDatabase(name: string): string;
  /**
   * Stops the server, keeping its data: `fast` (the default) disconnects clients cleanly, `immediate`
   * kills every backend at once, as a crash or a pulled cable would look to a client.
   */
  stop(mode?: 'fast' | 'immediate'): void;
  /** Starts it again on the same port and data. */
  start(): void;
  /** Stops it at once (its data is thrown away) and removes its directory. */
  destroy(): void;
};

const SERVER_ROOT = '/usr/lib/postgresql';

/** The bin directory of the newest installed server, installing Debian's `postgresql` if none is. */
export function postgresBin(): string {
  const find = () =>
    existsSync(SERVER_ROOT)
      ? readdirSync(SERVER_ROOT)
          .filter((version) => existsSync(join(SERVER_ROOT, version, 'bin', 'initdb')))
          .sort((a, b) => Number(b) - Number(a))[0]
      : undefined;
  ensureDebianPackages(['postgresql'], () => find() !== undefined);
  const version = find();
  if (version === undefined) {
    throw new Error(
      `No PostgreSQL server under ${SERVER_ROOT}: apt-get install postgresql (as .ci/run does).`,
    );
  }
  return join(SERVER_ROOT, version, 'bin');
}

export async function startPostgres({ maxConnections = 100 } = {}): Promise<ThrowawayPostgres> {
  const bin = postgresBin();
  const root = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'keygate-pg-'));
  const data = join(dir, 'data');
  // initdb refuses to run as root: the cluster belongs to the `postgres` user Debian's package made.
  if (root) chownSync(dir, uidOf('postgres'), gidOf('postgres'));
  const as = (command: string, args: string[]) =>
    root
      ? run('runuser', ['-u', 'postgres', '--', join(bin, command), ...args])
      : run(join(bin, command), args);
  as('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-instructions']);
  const port = await freePort();
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=on -c synchronous_commit=on -c max_connections=${maxConnections}`;
  const start = () =>
    as('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-o', options, '-w', '-t', '30', 'start']);
  const stop = (mode: 'fast' | 'immediate' = 'fast') =>
    as('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '30', 'stop']);
  start();
  const urlOf = (name: string) => `postgres://postgres@127.0.0.1:${port}/${name}`;
  const psql = (sql: string) =>
    as('psql', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-qAt', '-c', sql]);
  psql('CREATE DATABASE keygate');
  let running = true;
  return {
    url: urlOf('keygate'),
    port,
    pid: () => Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]),
    createDatabase(name) {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain database name: ${name}`);
      psql(`CREATE DATABASE ${name}`);
      return urlOf(name);
    },
    stop(mode = 'fast') {
      if (running) stop(mode);
      running = false;
    },
    start() {
      if (!running) start();
      running = true;
    },
    destroy() {
      // Immediate: no shutdown checkpoint, which after hundreds of test databases takes seconds.
      if (running) stop('immediate');
      running = false;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function run(command: string, args: string[], env: Record<string, string> = {}): string {
  const result = spawnSync(command, args, {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 120_000,
  });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} failed (${result.status}): ${result.stderr || result.stdout}`,
    );
  }
  return result.stdout;
}

function uidOf(user: string): number {
  return Number(run('id', ['-u', user]).trim());
}

function gidOf(user: string): number {
  return Number(run('id', ['-g', user]).trim());
}

/** A port the kernel just handed out on 127.0.0.1 (released again before PostgreSQL binds it). */
async function freePort(): Promise<number> {
  const listener = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const { port } = listener;
  listener.stop(true);
  return port;
}

// ------------------------------------------------------------ one server for a whole `bun test` run

/** Which engine the behaviour suite runs on: `KEYGATE_TEST_DATABASE=postgres bun test …` picks PostgreSQL. */
export const TEST_ENGINE: 'sqlite' | 'postgres' =
  process.env.KEYGATE_TEST_DATABASE === 'postgres' ? 'postgres' : 'sqlite';

const TEMPLATE = 'keygate_template';
let shared: Promise<{ server: ThrowawayPostgres; admin: SQL }> | undefined;
let databases = 0;

/** The run's throwaway server (started on first use, stopped when the test process exits). */
export function sharedPostgres(): Promise<{ server: ThrowawayPostgres; admin: SQL }> {
  shared ??= (async () => {
    const server = await startPostgres({ maxConnections: 2000 });
    // The preloaded afterAll (teardown.ts) stops it; this is the fallback for a run that dies early.
    process.on('exit', () => server.destroy());
    // A migrated template: each test database is a copy of it, made in a few milliseconds.
    const templateUrl = server.createDatabase(TEMPLATE);
    const db = await openPostgres(templateUrl, 1);
    await db.$client.close();
    const admin = new SQL(server.url.replace(/\/keygate$/, '/postgres'), { max: 1 });
    return { server, admin };
  })();
  return shared;
}

/** A fresh, migrated, empty database on the run's server; its URL. */
export async function freshPostgresDatabase(): Promise<string> {
  const { server, admin } = await sharedPostgres();
  const name = `keygate_test_${process.pid}_${++databases}`;
  await admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE}`);
  return server.url.replace(/\/keygate$/, `/${name}`);
}

/** Closes the admin connection and stops the run's server, if one was started. */
export async function stopSharedPostgres(): Promise<void> {
  if (shared === undefined) return;
  const { server, admin } = await shared;
  shared = undefined;
  await admin.close();
  server.destroy();
}
