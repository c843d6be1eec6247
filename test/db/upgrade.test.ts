// A database made by the previous release (migrations up to 0005) upgrades in place when this
// release starts on it: its keys keep working (verify, the /key scheme) and take the new settings.
import { Database } from 'bun:sqlite';
import { afterAll, expect, it } from 'bun:test';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/bun-sqlite';
import { migrate as migrateFrom } from 'drizzle-orm/bun-sqlite/migrator';
import { generateKeyId, generateSecret, hashSecret } from '../../src/apikeys/secrets';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { createKeygate } from '../../src/keygate';

const DRIZZLE = join(import.meta.dir, '..', '..', 'drizzle');
const PREVIOUS_RELEASE_LAST_MIGRATION = 5;
const scratch = mkdtempSync(join(tmpdir(), 'keygate-upgrade-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

it('a database of the previous release migrates, and its keys verify, authenticate and update', async () => {
  const path = join(scratch, 'keygate.db');
  const before = join(scratch, 'migrations');
  mkdirSync(join(before, 'meta'), { recursive: true });
  const journal = JSON.parse(readFileSync(join(DRIZZLE, 'meta', '_journal.json'), 'utf8'));
  journal.entries = journal.entries.filter(
    (entry: { idx: number }) => entry.idx <= PREVIOUS_RELEASE_LAST_MIGRATION,
  );
  writeFileSync(join(before, 'meta', '_journal.json'), JSON.stringify(journal));
  for (const entry of journal.entries as Array<{ tag: string }>)
    copyFileSync(join(DRIZZLE, `${entry.tag}.sql`), join(before, `${entry.tag}.sql`));
  const old = drizzle({ client: new Database(path, { create: true }) });
  migrateFrom(old, { migrationsFolder: before });
  // A key as the previous release wrote it: the seven columns it knew.
  const now = Date.now();
  const id = generateKeyId(now);
  const secret = generateSecret();
  old.$client
    .prepare(
      'INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at) VALUES (?, ?, 42, 3, ?, ?, ?)',
    )
    .run(id, hashSecret(secret), 'old', now, now + 3_600_000);
  old.$client.close();

  const secretForTokens = 'upgrade-test-secret-at-least-32-bytes-long';
  const keygate = await createKeygate(loadConfig({ DATABASE_URL: path, JWT_SECRET: secretForTokens }), {
    jwtSecret: secretForTokens,
    logger: createLogger('silent'),
  });
  try {
    const send = (method: string, url: string, headers: Record<string, string>, body?: unknown) =>
      keygate.handle(
        new Request(`http://localhost${url}`, {
          method,
          headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        }),
      );
    const verified = await send('POST', '/apikeys/verify', {}, { key: id, secret });
    expect(await verified.json()).toMatchObject({
      valid: true,
      code: 'VALID',
      principal: { key: id, userId: 42 },
    });
    const basic = { authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}` };
    const info = await send('GET', `/apikeys/${id}/key`, basic);
    expect(((await info.json()) as { apikey: unknown }).apikey).toMatchObject({ enabled: true });
    const token = await keygate.jwt.sign({ sub: 42, ttlSeconds: 600 });
    const updated = await send(
      'PATCH',
      `/apikeys/${id}/jwt`,
      { authorization: `Bearer ${token}` },
      { meta: { a: 1 } },
    );
    expect(updated.status).toBe(200);
  } finally {
    await keygate.close();
  }
});
