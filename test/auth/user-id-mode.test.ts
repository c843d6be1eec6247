// The user-id mode is the database's: recorded on first start, kept while the database holds keys (the
// other mode stops start-up with one line, exit 2), taken anew by a database without keys. And
// `keygate token` signs any subject with mapped user ids, without opening a database.
import { Database } from 'bun:sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SQL } from 'bun';
import { createJwtAuthority } from '../../src/auth/jwt';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { createKeygate, UserIdModeMismatch } from '../../src/keygate';
import { JWT_SECRET } from '../support/keygate';
import { freshPostgresDatabase, sharedPostgres, TEST_ENGINE } from '../support/postgres';

const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts');
const scratch = mkdtempSync(join(tmpdir(), 'keygate-user-ids-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
beforeAll(async () => {
  if (TEST_ENGINE === 'postgres') await sharedPostgres();
}, 60_000);

let files = 0;
/** A new, empty database of the engine under test: its DATABASE_URL. */
const freshDatabase = async () =>
  TEST_ENGINE === 'postgres' ? freshPostgresDatabase() : join(scratch, `keygate-${++files}.db`);

const silent = createLogger('error', () => {});
const start = (databaseUrl: string, mode: string) =>
  createKeygate(loadConfig({ DATABASE_URL: databaseUrl, JWT_SECRET, JWT_USER_IDS: mode }), {
    jwtSecret: JWT_SECRET,
    logger: silent,
  });

/** Starts keygate in `mode`, creates one key with a token for `sub`, and stops. */
async function withOneKey(databaseUrl: string, mode: string, sub: string | number) {
  const keygate = await start(databaseUrl, mode);
  const token = await keygate.jwt.sign({ sub, ttlSeconds: 600 });
  const response = await keygate.handle(
    new Request('http://localhost/apikeys/jwt', {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'a', level: 1, expiresIn: 600 }),
    }),
  );
  expect(response.status).toBe(201);
  await keygate.close();
}

/** The mode the database records, read past keygate. */
async function recordedMode(databaseUrl: string): Promise<unknown> {
  const query = "SELECT value FROM settings WHERE name = 'user_ids'";
  if (TEST_ENGINE === 'postgres') {
    const sql = new SQL(databaseUrl, { max: 1 });
    const [row] = await sql.unsafe(query);
    await sql.close();
    return row?.value;
  }
  const db = new Database(databaseUrl, { readonly: true });
  const row = db.query(query).get() as { value: string } | null;
  db.close();
  return row?.value;
}

describe(`the user-id mode on ${TEST_ENGINE}`, () => {
  it('is recorded on first start', async () => {
    const url = await freshDatabase();
    await withOneKey(url, 'mapped', 'auth0|first');
    expect(await recordedMode(url)).toBe('mapped');
  });

  it('stops start-up in the other mode once the database holds keys, both ways', async () => {
    const mapped = await freshDatabase();
    await withOneKey(mapped, 'mapped', 'auth0|first');
    const refused = await start(mapped, 'numeric').then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(UserIdModeMismatch);
    expect((refused as Error).message).toBe(
      'the database holds keys of JWT_USER_IDS=mapped user ids, so it cannot start with JWT_USER_IDS=numeric; set JWT_USER_IDS=mapped, or use a database without keys',
    );
    const numeric = await freshDatabase();
    await withOneKey(numeric, 'numeric', 42);
    await expect(start(numeric, 'mapped')).rejects.toBeInstanceOf(UserIdModeMismatch);
    // Refused without a change: the same mode still starts.
    await (await start(numeric, 'numeric')).close();
  });

  it('is taken anew by a database that holds no keys yet', async () => {
    const url = await freshDatabase();
    await (await start(url, 'mapped')).close();
    await withOneKey(url, 'numeric', 7);
    expect(await recordedMode(url)).toBe('numeric');
  });
});

function keygateCli(args: string[], env: Record<string, string>) {
  const result = Bun.spawnSync([process.execPath, CLI, ...args], {
    cwd: scratch,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
    timeout: 15_000, // a server that starts by mistake would run forever
  });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

describe.skipIf(TEST_ENGINE !== 'sqlite')('the command line', () => {
  it('keygate serve in the other mode: one line, exit 2', async () => {
    const url = await freshDatabase();
    await withOneKey(url, 'numeric', 42);
    const result = keygateCli(['serve', '--port', '0'], {
      DATABASE_URL: url,
      JWT_SECRET,
      JWT_USER_IDS: 'mapped',
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      `keygate: cannot start with database ${url} on 0.0.0.0:0: the database holds keys of JWT_USER_IDS=numeric user ids, so it cannot start with JWT_USER_IDS=mapped; set JWT_USER_IDS=numeric, or use a database without keys\n`,
    );
  });

  it('keygate token --sub takes any subject with mapped user ids, and opens no database', async () => {
    const databaseUrl = join(scratch, 'never-created', 'keygate.db');
    const env = { JWT_SECRET, JWT_USER_IDS: 'mapped', DATABASE_URL: databaseUrl };
    const result = keygateCli(['token', '--sub', 'auth0|5f7c8ec7c33c6c004bbafe82'], env);
    expect(result.code).toBe(0);
    const check = await createJwtAuthority({ secret: JWT_SECRET, clock: Date.now }).verify(
      result.stdout.trim(),
    );
    expect(check).toMatchObject({ ok: true, identity: { subject: 'auth0|5f7c8ec7c33c6c004bbafe82' } });
    expect(existsSync(databaseUrl)).toBe(false);
    expect(keygateCli(['token', '--sub', 'x'.repeat(255)], env).code).toBe(0);
    expect(keygateCli(['token', '--sub', 'x'.repeat(256)], env)).toEqual({
      code: 2,
      stdout: '',
      stderr: 'keygate: --sub must be 1 to 255 characters, without NUL, with JWT_USER_IDS=mapped.\n',
    });
  });

  it('keygate token --sub still wants a number with numeric user ids', () => {
    const result = keygateCli(['token', '--sub', 'auth0|abc'], { JWT_SECRET });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^keygate: --sub must be an integer from 0 to \d+\.\n$/);
  });

  it('keygate config shows JWT_USER_IDS', () => {
    const result = keygateCli(['config'], { JWT_SECRET, JWT_USER_IDS: 'mapped', DATABASE_URL: ':memory:' });
    expect(result.stdout).toContain('JWT_USER_IDS=mapped');
    expect(keygateCli(['config'], { JWT_USER_IDS: 'names' }).stderr).toBe(
      'keygate: JWT_USER_IDS must be numeric or mapped (got "names").\n',
    );
  });
});
