// The disk fills up: writes answer 503 in the error shape, key authentication keeps working, and
// writes succeed again once space returns, with nothing acknowledged lost; the writable gauge tells
// operators while /health, which only needs reads, stays 200. Needs root to mount a
// small tmpfs as the data directory; skipped, with the reason, otherwise.

import type { Database } from 'bun:sqlite';
import { afterAll, describe, expect, it } from 'bun:test';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashSecret } from '../../src/apikeys/secrets';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { createKeygate } from '../../src/keygate';
import { sqliteOf } from '../support/raw-query';

type Created = { apikey: { key: string; secret: string } };

const JWT_SECRET = 'disk-full-tests-secret-at-least-32-bytes!';
const dir = mkdtempSync(join(tmpdir(), 'keygate-full-'));
const mountPoint = join(dir, 'data');
mkdirSync(mountPoint);

function tryMount(): string | null {
  if (process.getuid?.() !== 0) return 'not root: cannot mount a small tmpfs';
  const mount = Bun.spawnSync(['mount', '-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mountPoint], {
    stderr: 'pipe',
  });
  return mount.exitCode === 0 ? null : `mount failed: ${mount.stderr.toString().trim()}`;
}
const cannotMount = tryMount();
if (cannotMount) console.warn(`disk-full tests skipped: ${cannotMount}`);

afterAll(() => {
  // Lazy as a fallback: never leave the mount behind, even if something still holds a file there.
  if (!cannotMount && Bun.spawnSync(['umount', mountPoint]).exitCode !== 0) {
    Bun.spawnSync(['umount', '-l', mountPoint]);
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Writes zeros until the file system refuses; returns the filler's path. */
function fillDisk(): string {
  const filler = join(mountPoint, 'filler');
  const fd = openSync(filler, 'w');
  const chunk = new Uint8Array(16 * 1024);
  try {
    for (let i = 0; i < 10_000; i++) writeSync(fd, chunk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
  return filler;
}

describe.skipIf(cannotMount !== null)('a full disk', () => {
  it('writes answer 503, authentication goes on, writes resume when space returns', async () => {
    const keygate = await createKeygate(
      loadConfig({ DATABASE_URL: join(mountPoint, 'keygate.db'), JWT_SECRET }),
      {
        jwtSecret: JWT_SECRET,
        logger: createLogger('silent'),
      },
    );
    try {
      const bearer = { authorization: `Bearer ${await keygate.jwt.sign({ sub: 9, ttlSeconds: 600 })}` };
      const send = (path: string, headers: Record<string, string>, body: unknown) =>
        keygate.handle(
          new Request(`http://localhost${path}`, {
            method: 'POST',
            headers: { ...headers, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          }),
        );
      const create = () => send('/apikeys/jwt', bearer, { name: 'x'.repeat(128), level: 1, expiresIn: 600 });
      const acknowledged: Array<{ key: string; secret: string }> = [];
      const first = await create();
      expect(first.status).toBe(201);
      acknowledged.push(((await first.json()) as Created).apikey);

      const filler = fillDisk();
      // The WAL may still have room for a few commits; keep writing until one is refused.
      let refused: Response | undefined;
      for (let i = 0; i < 5000 && !refused; i++) {
        const response = await create();
        if (response.status === 201) acknowledged.push(((await response.json()) as Created).apikey);
        else refused = response;
      }
      expect(refused?.status).toBe(503);
      expect(refused?.headers.get('content-type')).toBe('application/json');
      expect(await refused?.json()).toEqual({ result: 'error', error: expect.any(String) });

      // Authentication only reads: a valid key is recognised, a wrong secret refused.
      const [known] = acknowledged as [{ key: string; secret: string }];
      const basic = (secret: string) => ({
        authorization: `Basic ${Buffer.from(`${known.key}:${secret}`).toString('base64')}`,
      });
      const authenticated = await send('/apikeys/key', basic(known.secret), {
        name: 'x',
        level: 8,
        expiresIn: 60,
      });
      expect(authenticated.status).toBe(403);
      expect(((await authenticated.json()) as { error: string }).error).toStartWith(
        'You may create keys up to level 1',
      );
      expect((await send('/apikeys/key', basic(`${known.secret}x`), {})).status).toBe(403);

      rmSync(filler);
      const resumed = await create();
      expect(resumed.status).toBe(201);
      acknowledged.push(((await resumed.json()) as Created).apikey);

      const find = (sqliteOf(keygate) as Database).query(
        'SELECT secret_hash AS hash FROM api_keys WHERE id = ?',
      );
      for (const k of acknowledged) {
        const row = find.get(k.key) as { hash: Uint8Array } | null;
        expect(row && Buffer.from(row.hash).equals(hashSecret(k.secret))).toBe(true);
      }
      find.finalize();
      const integrity = (sqliteOf(keygate) as Database).query('PRAGMA integrity_check').get() as {
        integrity_check: string;
      };
      expect(integrity.integrity_check).toBe('ok');
    } finally {
      await keygate.close();
    }
  }, 20_000);

  it('keygate_db_writable says 0 while writes are refused and /health stays 200, then 1 again', async () => {
    const keygate = await createKeygate(
      loadConfig({ DATABASE_URL: join(mountPoint, 'writable.db'), JWT_SECRET, METRICS_PORT: '0' }),
      { jwtSecret: JWT_SECRET, logger: createLogger('silent') },
    );
    const writable = async () =>
      /^keygate_db_writable (\d+)$/m.exec((await keygate.metrics?.exposition()) ?? '')?.[1];
    try {
      const bearer = { authorization: `Bearer ${await keygate.jwt.sign({ sub: 9, ttlSeconds: 600 })}` };
      const create = () =>
        keygate.handle(
          new Request('http://localhost/apikeys/jwt', {
            method: 'POST',
            headers: { ...bearer, 'content-type': 'application/json' },
            body: JSON.stringify({ name: 'x'.repeat(128), level: 1, expiresIn: 600 }),
          }),
        );
      expect((await create()).status).toBe(201);
      expect(await writable()).toBe('1');

      const filler = fillDisk();
      let refused = false;
      for (let i = 0; i < 5000 && !refused; i++) refused = (await create()).status === 503;
      expect(refused).toBe(true);
      expect(await writable()).toBe('0');
      // The database still answers reads: health says up, only the new gauge tells of the full disk.
      expect((await keygate.handle(new Request('http://localhost/health'))).status).toBe(200);

      rmSync(filler);
      expect((await create()).status).toBe(201);
      expect(await writable()).toBe('1');
    } finally {
      await keygate.close();
    }
  }, 20_000);
});
