// `keygate purge` (the one-shot command) writes each purged key's key.deleted in its batch, as the
// server's purge timer does. SQLite: the command runs on the file the test's keygate wrote.
import { afterAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testKeygate } from '../support/keygate';
import { TEST_ENGINE } from '../support/postgres';
import { createEndpoint } from './support';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-webhook-purge-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe.skipIf(TEST_ENGINE !== 'sqlite')('keygate purge', () => {
  it('writes key.deleted with reason expired for each key it removes', async () => {
    const path = join(scratch, 'keygate.db');
    const env = { DATABASE_URL: path, WEBHOOK_ALLOW_PRIVATE: 'true' };
    const kg = await testKeygate(env);
    const endpoint = await createEndpoint(kg, 'http://127.0.0.1:9/hooks', ['key.deleted']);
    // The test's clock is days behind the real one, which the command uses: this key has expired.
    const key = await kg.createKey(4, { expiresIn: 60 });
    await kg.close();
    const purge = Bun.spawnSync(['bun', join(import.meta.dir, '..', '..', 'src', 'cli.ts'), 'purge'], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DATABASE_URL: path },
    });
    expect(purge.stdout.toString().trim()).toBe('purged 1 expired keys');
    const again = await testKeygate(env);
    try {
      const messages = await again.req('GET', `/admin/webhooks/${endpoint.id}/messages`, {
        headers: await again.operator(),
      });
      expect(messages.json.messages.map((m: { type: string }) => m.type)).toEqual(['key.deleted']);
      const [row] =
        again.keygate.client.engine === 'sqlite'
          ? (again.keygate.client.sqlite.query('SELECT body FROM webhook_messages').all() as Array<{
              body: string;
            }>)
          : [];
      expect(JSON.parse(row?.body as string).data).toMatchObject({
        key: key.key,
        reason: 'expired',
        by: 'purge',
      });
    } finally {
      await again.close();
    }
  });
});
