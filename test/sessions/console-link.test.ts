// `keygate console-link`: a link made by the CLI on the server's database opens a session on the
// server (the first login on a new server), once; the flags are checked.
import { afterAll, expect, it } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { createKeygate } from '../../src/keygate';
import { JWT_SECRET } from '../support/keygate';

const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts');
const scratch = mkdtempSync(join(tmpdir(), 'keygate-console-link-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function cli(args: string[], env: Record<string, string> = {}) {
  const result = Bun.spawnSync([process.execPath, CLI, ...args], {
    cwd: scratch,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
    timeout: 20_000,
  });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

it('prints a one-time link the server accepts, for a user or the operator', async () => {
  const database = join(scratch, 'keygate.db');
  expect(cli(['migrate', '--database-url', database]).code).toBe(0);
  const user = cli(['console-link', '--user', '42', '--session-seconds', '600', '--database-url', database], {
    PUBLIC_URL: 'http://keys.example.com:8080',
  });
  expect(user.stderr).toBe('');
  expect(user.stdout).toMatch(/^http:\/\/keys\.example\.com:8080\/console#code=[A-Za-z0-9_-]{43}\n$/);
  const operator = cli(['console-link', '--operator', '--database-url', database]);
  expect(operator.stdout).toMatch(/^\/console#code=[A-Za-z0-9_-]{43}\n$/);

  const config = loadConfig({
    DATABASE_URL: database,
    JWT_SECRET,
    PUBLIC_URL: 'http://keys.example.com:8080',
  });
  const keygate = await createKeygate(config, { jwtSecret: JWT_SECRET, logger: createLogger('silent') });
  try {
    const exchange = (url: string) =>
      keygate.handle(
        new Request('http://keys.example.com:8080/console/api/session', {
          method: 'POST',
          headers: { 'content-type': 'application/json', origin: 'http://keys.example.com:8080' },
          body: JSON.stringify({ code: url.trim().split('#code=')[1] }),
        }),
      );
    const opened = await exchange(user.stdout);
    expect(opened.status).toBe(200);
    const body = (await opened.json()) as { session: Record<string, unknown> };
    expect(body.session).toMatchObject({ kind: 'user', userId: 42, level: 8, by: 'cli:console-link' });
    expect((await exchange(user.stdout)).status).toBe(403);
    const asOperator = (await (await exchange(operator.stdout)).json()) as {
      session: Record<string, unknown>;
    };
    expect(asOperator.session).toMatchObject({ kind: 'operator', userId: null, by: 'admin:console-link' });
  } finally {
    await keygate.close();
  }
}, 30_000);

it.each([
  [[], 'keygate: keygate console-link needs --user USER_ID or --operator (one of them).\n'],
  [
    ['--user', '1', '--operator'],
    'keygate: keygate console-link needs --user USER_ID or --operator (one of them).\n',
  ],
  [['--operator', '--session-seconds', '30'], 'keygate: --session-seconds must be'],
  [['--operator', '--console', 'off'], 'keygate: the console is off (CONSOLE=off): no link would open it.\n'],
])('console-link %p is refused (exit 2)', (args, message) => {
  const database = join(scratch, 'refusals.db');
  cli(['migrate', '--database-url', database]);
  const result = cli(['console-link', ...args, '--database-url', database]);
  expect(result.code).toBe(2);
  expect(result.stderr.startsWith(message)).toBe(true);
});
