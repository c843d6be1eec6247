// Files keygate creates are the owner's alone even with umask 000: the data directory
// 0700, the database and its -wal and -shm files 0600.
import { afterAll, expect, it } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = mkdtempSync(join(tmpdir(), 'keygate-modes-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const mode = (path: string) => statSync(path).mode & 0o777;

/**
 * Opens a database (and the generated JWT secret) at `path` in a subprocess whose umask is 000; returns
 * the modes of -wal and -shm while the database is open (closing removes them).
 */
function openWithUmask0(path: string): { wal: number; shm: number } {
  const script = `
    process.umask(0);
    const { openDatabase } = await import(${JSON.stringify(join(import.meta.dir, '../../src/db/sqlite/open.ts'))});
    const { resolveJwtSecret } = await import(${JSON.stringify(join(import.meta.dir, '../../src/jwt-secret.ts'))});
    resolveJwtSecret({ jwtSecret: undefined, database: { engine: "sqlite", path: ${JSON.stringify(path)} } });
    openDatabase(${JSON.stringify(path)});
    const { statSync } = await import('node:fs');
    const mode = (suffix) => statSync(${JSON.stringify(path)} + suffix).mode & 0o777;
    console.log(JSON.stringify({ wal: mode('-wal'), shm: mode('-shm') }));
  `;
  const result = Bun.spawnSync([process.execPath, '-e', script], { stdout: 'pipe', stderr: 'pipe' });
  if (result.exitCode !== 0) throw new Error(result.stderr.toString());
  return JSON.parse(result.stdout.toString());
}

it('with umask 000, a data directory keygate creates is 0700 and the database, -wal and -shm are 0600', () => {
  const dir = join(root, 'fresh', 'data');
  const path = join(dir, 'keygate.db');
  const open = openWithUmask0(path);
  expect(mode(join(root, 'fresh'))).toBe(0o700);
  expect(mode(dir)).toBe(0o700);
  expect(mode(path)).toBe(0o600);
  expect(mode(join(dir, 'jwt-secret'))).toBe(0o600);
  expect(open).toEqual({ wal: 0o600, shm: 0o600 });
});

it('leaves the mode of a data directory that already exists alone', () => {
  const dir = join(root, 'existing');
  mkdirSync(dir, { mode: 0o755 });
  openWithUmask0(join(dir, 'keygate.db'));
  expect(mode(dir)).toBe(0o755);
  expect(mode(join(dir, 'keygate.db'))).toBe(0o600);
});
