// Another process holds SQLite's write lock: writes wait busy_timeout, then answer 503 in the error
// shape; reads (key authentication) go on; the service recovers by itself once the lock is released,
// and nothing acknowledged is lost. (A second connection stands in for the other process.)

import { Database } from 'bun:sqlite';
import { afterAll, beforeAll, expect, it } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashSecret } from '../../src/apikeys/secrets';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { createKeygate } from '../../src/keygate';
import { sqliteOf } from '../support/raw-query';

type Created = { apikey: { key: string; secret: string } };

const JWT_SECRET = 'write-lock-tests-secret-at-least-32-bytes';
const dir = mkdtempSync(join(tmpdir(), 'keygate-lock-'));
const path = join(dir, 'keygate.db');
// The wait is injected short, so the test does not spend the default 2 s of real time waiting.
const WRITE_LOCK_WAIT_MS = 200;
const keygate = await createKeygate(loadConfig({ DATABASE_URL: path, JWT_SECRET }), {
  jwtSecret: JWT_SECRET,
  logger: createLogger('silent'),
  writeLockWaitMs: WRITE_LOCK_WAIT_MS,
});
let bearer: Record<string, string>;
beforeAll(async () => {
  bearer = { authorization: `Bearer ${await keygate.jwt.sign({ sub: 7, ttlSeconds: 600 })}` };
});
afterAll(async () => {
  await keygate.close();
  rmSync(dir, { recursive: true, force: true });
});

const send = async (method: string, path: string, headers: Record<string, string>, body?: unknown) =>
  keygate.handle(
    new Request(`http://localhost${path}`, {
      method,
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );
const create = (headers = bearer, level = 1, scheme = 'jwt') =>
  send('POST', `/apikeys/${scheme}`, headers, { name: 'lock', level, expiresIn: 600 });
const basic = (key: string, secret: string) => ({
  authorization: `Basic ${Buffer.from(`${key}:${secret}`).toString('base64')}`,
});

it('writes answer 503 after busy_timeout while another connection holds the lock, reads go on, and it recovers', async () => {
  const acknowledged = ((await (await create()).json()) as Created).apikey;
  const victim = ((await (await create()).json()) as Created).apikey;

  const other = new Database(path);
  other.run('BEGIN EXCLUSIVE');
  try {
    // A create and a delete in the same turn share one commit, and so one wait for the lock.
    const started = performance.now();
    const [created, deleted] = await Promise.all([
      create(),
      send('DELETE', `/apikeys/${victim.key}/jwt`, bearer),
    ]);
    const waited = performance.now() - started;
    for (const response of [created, deleted]) {
      expect(response.status).toBe(503);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(response.headers.get('retry-after')).toBe('1');
      expect(await response.json()).toEqual({ result: 'error', error: expect.stringContaining('database') });
    }
    expect(waited).toBeGreaterThanOrEqual(WRITE_LOCK_WAIT_MS * 0.9);

    // Authentication only reads: a valid key is recognised (403 for the level, not for the secret),
    // a wrong secret is refused, and /health answers.
    const authenticated = await create(basic(acknowledged.key, acknowledged.secret), 8, 'key');
    expect(authenticated.status).toBe(403);
    expect(((await authenticated.json()) as { error: string }).error).toStartWith(
      'You may create keys up to level 1',
    );
    const wrong = await send('POST', '/apikeys/key', basic(acknowledged.key, `${acknowledged.secret}x`), {});
    expect(wrong.status).toBe(403);
    expect((await send('GET', '/health', {})).status).toBe(200);
  } finally {
    other.run('ROLLBACK');
    other.close();
  }

  // Released: writes succeed again without a restart; the refused delete did not happen.
  expect((await create()).status).toBe(201);
  expect((await send('DELETE', `/apikeys/${victim.key}/jwt`, bearer)).status).toBe(204);
  const rows = (sqliteOf(keygate) as Database)
    .query('SELECT id, secret_hash AS hash FROM api_keys')
    .all() as Array<{
    id: string;
    hash: Uint8Array;
  }>;
  expect(rows).toHaveLength(2);
  const first = rows.find((row) => row.id === acknowledged.key);
  expect(first && Buffer.from(first.hash).equals(hashSecret(acknowledged.secret))).toBe(true);
}, 15_000);

it('a write waiting for the lock does not stop other requests, and succeeds once the lock is released', async () => {
  const other = new Database(path);
  other.run('BEGIN EXCLUSIVE');
  const order: string[] = [];
  const write = create().then((response) => {
    order.push('write');
    return response;
  });
  // Sent while the write waits; the lock is released only once this has been answered.
  const health = Bun.sleep(50)
    .then(() => send('GET', '/health', {}))
    .then((response) => {
      order.push('health');
      other.run('ROLLBACK');
      other.close();
      return response;
    });
  expect((await health).status).toBe(200);
  expect((await write).status).toBe(201);
  expect(order).toEqual(['health', 'write']);
}, 15_000);
