// A throwaway PostgreSQL for tests: Debian's server (installed here when missing and we are root),
// `initdb` as an unprivileged user in a temporary directory, 127.0.0.1 on a free port, and stopped by
// pg_ctl (which signals the postmaster it started, by the PID in its postmaster.pid) afterwards.
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type ThrowawayPostgres = {
  /** `postgres://…` for the database `keygate`. */
  url: string;
  port: number;
  /** The postmaster's PID while it runs. */
  pid(): number;
  /** A fresh, empty database on the same server; its URL. */
  createDatabase(name: string): string;
  /** Stops the server, keeping its data (fast shutdown: clients are disconnected). */
  stop(): void;
  /** Starts it again on the same port and data. */
  start(): void;
  /** Stops it and removes its directory. */
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
  let version = find();
  if (version === undefined && process.getuid?.() === 0) {
    run('apt-get', ['install', '-y', '-qq', 'postgresql'], { DEBIAN_FRONTEND: 'noninteractive' });
    version = find();
  }
  if (version === undefined) {
    throw new Error(
      `No PostgreSQL server under ${SERVER_ROOT}: apt-get install postgresql (as .ci/run does).`,
    );
  }
  return join(SERVER_ROOT, version, 'bin');
}

export async function startPostgres(): Promise<ThrowawayPostgres> {
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
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=on -c synchronous_commit=on`;
  const start = () =>
    as('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-o', options, '-w', '-t', '30', 'start']);
  const stop = () => as('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '30', 'stop']);
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
    stop() {
      if (running) stop();
      running = false;
    },
    start() {
      if (!running) start();
      running = true;
    },
    destroy() {
      if (running) stop();
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
