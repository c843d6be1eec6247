// `keygate backup FILE` on a serving SQLite database: a real keygate takes creates over its socket
// while the backup runs; every create acknowledged before the backup started is in the copy, and a
// keygate started on the copy verifies those keys. The JWT secret keygate generated is copied to
// FILE.jwt-secret, and a restore with it accepts the tokens issued before; one the operator sets is
// named as theirs to keep. Refusals: an existing target, PostgreSQL, :memory:.

import { Database } from 'bun:sqlite';
import { afterAll, describe, expect, it } from 'bun:test';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createJwtAuthority } from '../../src/auth/jwt';
import { readStartLine } from '../support/binary';

const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts');
const SECRET = 'backup-tests-secret-at-least-32-bytes-long';
const scratch = mkdtempSync(join(tmpdir(), 'keygate-backup-'));
const servers: ReturnType<typeof Bun.spawn>[] = [];
afterAll(() => {
  for (const server of servers) server.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

const env = (databaseUrl: string, jwtSecret: string | null = SECRET) => ({
  PATH: process.env.PATH ?? '',
  DATABASE_URL: databaseUrl,
  ...(jwtSecret === null ? {} : { JWT_SECRET: jwtSecret }),
  HOST: '127.0.0.1',
  PORT: '0',
  MAX_KEYS_PER_USER: '1000000',
});

/** keygate serving `databaseUrl`; `jwtSecret` null: the secret generated beside the database. */
async function startServer(databaseUrl: string, jwtSecret: string | null = SECRET) {
  const server = Bun.spawn([process.execPath, CLI, 'serve'], {
    env: env(databaseUrl, jwtSecret),
    stdout: 'pipe',
    stderr: 'inherit',
  });
  servers.push(server);
  const start = await readStartLine((server.stdout as ReadableStream<Uint8Array>).getReader());
  return { server, base: start.url.replace(/\/$/, '') };
}

function keygate(args: string[], settings: Record<string, string>) {
  const result = Bun.spawnSync([process.execPath, CLI, ...args], {
    cwd: scratch,
    env: { PATH: process.env.PATH ?? '', ...settings },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

type Created = { key: string; secret: string };

describe('keygate backup', () => {
  it('copies a database under write load: every acknowledged create is in the copy, which serves', async () => {
    const dir = mkdtempSync(join(scratch, 'load-'));
    const live = join(dir, 'keygate.db');
    const copy = join(dir, 'copy.db');
    const { server, base } = await startServer(live);
    const jwt = createJwtAuthority({ secret: SECRET, clock: () => Date.now() });

    const acknowledged: Created[] = [];
    let stopped = false;
    let reached: () => void = () => {};
    const enough = new Promise<void>((resolve) => {
      reached = resolve;
    });
    const worker = async (sub: number) => {
      const authorization = `Bearer ${await jwt.sign({ sub, ttlSeconds: 600 })}`;
      for (let n = 0; !stopped; n++) {
        const response = await fetch(`${base}/apikeys/jwt`, {
          method: 'POST',
          headers: { authorization, 'content-type': 'application/json' },
          body: JSON.stringify({ name: `load ${sub}.${n}`, level: 1, expiresIn: 3600 }),
        });
        expect(response.status).toBe(201);
        const { apikey } = (await response.json()) as { apikey: Created };
        acknowledged.push({ key: apikey.key, secret: apikey.secret });
        if (acknowledged.length >= 300) reached();
      }
    };
    const workers = [1, 2, 3, 4, 5, 6, 7, 8].map(worker);
    await enough;

    const before = [...acknowledged];
    const backup = Bun.spawn([process.execPath, CLI, 'backup', copy], {
      env: env(live),
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const code = await backup.exited;
    const afterBackup = acknowledged.length;
    stopped = true;
    await Promise.all(workers);
    expect(await new Response(backup.stderr as ReadableStream).text()).toBe('');
    expect(code).toBe(0);
    expect(await new Response(backup.stdout as ReadableStream).text()).toBe(
      `backed up ${live} to ${copy}\nnot copied: the JWT secret (JWT_SECRET or JWT_SECRET_FILE) is yours; keep it with this backup, or a restored keygate refuses the tokens issued before\n`,
    );
    expect(existsSync(`${copy}.jwt-secret`)).toBe(false);
    // The load went on while the copy was made, and after.
    expect(acknowledged.length).toBeGreaterThan(afterBackup);
    server.kill('SIGTERM');
    expect(await server.exited).toBe(0);

    expect(statSync(copy).mode & 0o777).toBe(0o600);
    const db = new Database(copy, { readonly: true });
    expect(db.query('PRAGMA integrity_check').get()).toEqual({ integrity_check: 'ok' });
    const stored = db.query('SELECT count(*) AS n FROM api_keys').get() as { n: number };
    db.close();
    expect(stored.n).toBeGreaterThanOrEqual(before.length);
    expect(stored.n).toBeLessThanOrEqual(acknowledged.length);

    const restored = await startServer(copy);
    const verdicts = await Promise.all(
      before.map(async ({ key, secret }) => {
        const response = await fetch(`${restored.base}/apikeys/verify`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ key, secret }),
        });
        return ((await response.json()) as { code: string }).code;
      }),
    );
    expect(new Set(verdicts)).toEqual(new Set(['VALID']));
    restored.server.kill('SIGTERM');
    expect(await restored.server.exited).toBe(0);
  }, 60_000);

  it('copies the generated JWT secret beside the copy (0600): a restore accepts the tokens issued before', async () => {
    const dir = mkdtempSync(join(scratch, 'secret-'));
    const live = join(dir, 'live', 'keygate.db');
    const first = await startServer(live, null);
    first.server.kill('SIGTERM');
    expect(await first.server.exited).toBe(0);
    const token = keygate(['token', '--sub', '7'], { DATABASE_URL: live });
    expect(token.stderr).toBe('');
    expect(token.code).toBe(0);

    const copy = join(dir, 'copy.db');
    const result = keygate(['backup', copy], { DATABASE_URL: live });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const secretFile = join(dir, 'live', 'jwt-secret');
    expect(result.stdout).toBe(
      `backed up ${live} to ${copy}\nbacked up the JWT secret ${secretFile} to ${copy}.jwt-secret (mode 0600); restore it beside the database as jwt-secret, or tokens issued before stop working\n`,
    );
    expect(statSync(`${copy}.jwt-secret`).mode & 0o777).toBe(0o600);
    expect(readFileSync(`${copy}.jwt-secret`, 'utf8')).toBe(readFileSync(secretFile, 'utf8'));

    mkdirSync(join(dir, 'restored'), { mode: 0o700 });
    const restoredDb = join(dir, 'restored', 'keygate.db');
    copyFileSync(copy, restoredDb);
    copyFileSync(`${copy}.jwt-secret`, join(dir, 'restored', 'jwt-secret'));
    const restored = await startServer(restoredDb, null);
    const response = await fetch(`${restored.base}/apikeys/jwt`, {
      headers: { authorization: `Bearer ${token.stdout.trim()}` },
    });
    expect(response.status).toBe(200);
    restored.server.kill('SIGTERM');
    expect(await restored.server.exited).toBe(0);

    // A second backup to the same name finds the secret's copy taken and writes nothing.
    rmSync(copy);
    const again = keygate(['backup', copy], { DATABASE_URL: live });
    expect(again.code).toBe(2);
    expect(again.stderr).toBe(
      `keygate: ${copy}.jwt-secret already exists; keygate backup writes a new file and never replaces one.\n`,
    );
    expect(existsSync(copy)).toBe(false);
  }, 30_000);

  it('refuses a target that exists, and leaves it as it was', () => {
    const dir = mkdtempSync(join(scratch, 'exists-'));
    const live = join(dir, 'keygate.db');
    expect(keygate(['migrate'], { DATABASE_URL: live }).code).toBe(0);
    const target = join(dir, 'taken.db');
    writeFileSync(target, 'not mine');
    const result = keygate(['backup', target], { DATABASE_URL: live });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      `keygate: ${target} already exists; keygate backup writes a new file and never replaces one.\n`,
    );
    expect(readFileSync(target, 'utf8')).toBe('not mine');
  });

  it.each([
    [
      'postgres://keygate:hunter2@127.0.0.1:1/keygate',
      'keygate: keygate backup copies a SQLite database; back up PostgreSQL with pg_dump (pg_dump -Fc -f keygate.dump DATABASE_URL) and restore with pg_restore.\n',
    ],
    [':memory:', 'keygate: DATABASE_URL is :memory:, which keeps nothing to back up.\n'],
  ])('refuses DATABASE_URL=%p with one line (exit 2)', (databaseUrl, stderr) => {
    const result = keygate(['backup', join(scratch, 'never.db')], { DATABASE_URL: databaseUrl });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(stderr);
  });

  it('refuses a database that does not exist, and needs its FILE', () => {
    const missing = join(scratch, 'missing', 'keygate.db');
    expect(keygate(['backup', join(scratch, 'x.db')], { DATABASE_URL: missing }).stderr).toStartWith(
      `keygate: the database ${missing} does not exist; keygate backup uses an existing one`,
    );
    expect(keygate(['backup'], { DATABASE_URL: missing }).stderr).toBe(
      'keygate: keygate backup needs FILE (see keygate backup --help).\n',
    );
  });
});
