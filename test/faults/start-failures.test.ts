// A database keygate cannot use at start: it exits 2 with one clear line on stderr, and leaves the
// file exactly as it found it. Root bypasses file modes, so as root the server runs as `nobody`
// (setpriv); the permission cases are skipped, with the reason, when that is not possible.
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/sqlite/open';
import { buildBinary } from '../support/binary';

const root = mkdtempSync(join(tmpdir(), 'keygate-start-'));
chmodSync(root, 0o755);
afterAll(() => rmSync(root, { recursive: true, force: true }));

// The compiled binary, in a directory any user can read: the unprivileged runs below could not read
// the sources of a checkout under a private directory (as CI's fresh clone is).
const binary = join(root, 'keygate');
beforeAll(() => buildBinary(binary), 60_000);

const isRoot = process.getuid?.() === 0;
const setpriv = Bun.which('setpriv');
/** As root, file modes only bite an unprivileged user. */
const asUnprivileged = isRoot
  ? setpriv
    ? [setpriv, '--reuid=65534', '--regid=65534', '--clear-groups']
    : null
  : [];

function start(databaseUrl: string, prefix: string[] = []) {
  const result = Bun.spawnSync([...prefix, binary, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: databaseUrl,
      JWT_SECRET: 'start-failure-tests-secret-32-bytes-long',
      HOST: '127.0.0.1',
      PORT: '0',
    },
    stdout: 'pipe',
    stderr: 'pipe',
    // A server that starts anyway would run forever: that is the failure being tested for.
    timeout: 3000,
  });
  return { code: result.exitCode, signal: result.signalCode, stderr: result.stderr.toString() };
}

function expectRefusal(result: ReturnType<typeof start>, databaseUrl: string, reason: RegExp) {
  expect(result.signal ?? null).toBeNull();
  expect(result.code).toBe(2);
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toStartWith(`keygate: cannot start with database ${databaseUrl} `);
  expect(lines[0]).toMatch(reason);
}

const digest = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

function dir(name: string, mode = 0o755): string {
  const path = join(root, name);
  mkdirSync(path);
  chmodSync(path, mode);
  return path;
}

function migratedDatabase(path: string): void {
  const db = openDatabase(path);
  db.$client.run('PRAGMA wal_checkpoint(TRUNCATE)');
  db.$client.close();
  for (const suffix of ['-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
}

describe('a corrupt database file', () => {
  it.each([
    // Fixed pseudo-random bytes (a seeded LCG), so every run tests the same file.
    ['random bytes', () => new Uint8Array(8192).map((_, i) => (i * 1103515245 + 12345) >>> 16)],
    ['a text file', () => new TextEncoder().encode('not a database at all\n')],
  ])('%s: exit 2, one line, file untouched', (_, bytes) => {
    const path = join(dir(`corrupt-${_.replace(' ', '-')}`), 'keygate.db');
    writeFileSync(path, bytes());
    const before = digest(path);
    expectRefusal(start(path), path, /file is not a database/);
    expect(digest(path)).toBe(before);
  });
});

describe.skipIf(asUnprivileged === null)('permissions (as root: run as nobody via setpriv)', () => {
  const prefix = asUnprivileged ?? [];

  it('a data directory that is not writable: exit 2, nothing created', () => {
    const path = join(dir('read-only-dir', 0o555), 'keygate.db');
    expectRefusal(start(path, prefix), path, /unable to open database file/);
    expect(existsSync(path)).toBe(false);
  });

  it('a data directory that cannot be created: exit 2', () => {
    const path = join(dir('read-only-parent', 0o555), 'data', 'keygate.db');
    expectRefusal(start(path, prefix), path, /permission denied/i);
  });

  it('a read-only database file in a writable directory: exit 2, file untouched', () => {
    const path = join(dir('read-only-file', 0o777), 'keygate.db');
    migratedDatabase(path);
    chmodSync(path, 0o444);
    const before = digest(path);
    expectRefusal(start(path, prefix), path, /read-only|readonly/);
    expect(digest(path)).toBe(before);
  });

  it('a writable database file in a read-only directory (no room for the WAL): exit 2, file untouched', () => {
    const parent = dir('read-only-dir-writable-file', 0o777);
    const path = join(parent, 'keygate.db');
    migratedDatabase(path);
    chmodSync(path, 0o666);
    chmodSync(parent, 0o555);
    const before = digest(path);
    expectRefusal(start(path, prefix), path, /readonly|read-only|unable to open/);
    expect(digest(path)).toBe(before);
  });
});
