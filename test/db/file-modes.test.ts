// File modes under umask 000: the data directory keygate creates is 0700, the database and its -wal
// and -shm files are 0600, so another local user can neither read the keys nor replace jwt-secret.
import { afterAll, expect, it } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-modes-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const OPEN = join(import.meta.dir, '../../src/db/open.ts');
const SECRET = join(import.meta.dir, '../../src/auth/jwt-secret.ts');

/** Opens a database in a subprocess whose umask is 000 (umask is per process); returns the modes. */
function openUnderUmask000(databasePath: string): Record<string, string> {
  const script = `
    process.umask(0);
    const { openDatabase } = await import(${JSON.stringify(OPEN)});
    const jwt = await import(${JSON.stringify(SECRET)});
    const db = openDatabase(${JSON.stringify(databasePath)});
    jwt.resolveJwtSecret({ jwtSecret: undefined, databaseUrl: ${JSON.stringify(databasePath)} });
    const { statSync, existsSync } = await import('node:fs');
    const { dirname, join } = await import('node:path');
    const mode = (p) => existsSync(p) ? (statSync(p).mode & 0o777).toString(8) : 'missing';
    const dir = dirname(${JSON.stringify(databasePath)});
    console.log(JSON.stringify({
      dir: mode(dir),
      db: mode(${JSON.stringify(databasePath)}),
      wal: mode(${JSON.stringify(databasePath)} + '-wal'),
      shm: mode(${JSON.stringify(databasePath)} + '-shm'),
      secret: mode(join(dir, 'jwt-secret')),
    }));
    db.$client.close();
  `;
  const result = Bun.spawnSync([process.execPath, '-e', script], { stderr: 'pipe' });
  expect(result.stderr.toString()).toBe('');
  return JSON.parse(result.stdout.toString());
}

it('creates the data directory 0700 and the database, -wal, -shm and jwt-secret 0600 under umask 000', () => {
  const modes = openUnderUmask000(join(scratch, 'fresh', 'data', 'keygate.db'));
  expect(modes).toEqual({ dir: '700', db: '600', wal: '600', shm: '600', secret: '600' });
  expect((statSync(join(scratch, 'fresh')).mode & 0o777).toString(8)).toBe('700');
});

it('leaves an existing data directory as it is', () => {
  const dir = join(scratch, 'existing');
  mkdirSync(dir, { mode: 0o755 });
  const modes = openUnderUmask000(join(dir, 'keygate.db'));
  expect(modes).toMatchObject({ dir: '755', db: '600', wal: '600', shm: '600' });
});
