// The CLI with an identity provider's keys and *_FILE settings: one line and exit 2 for every
// misconfiguration, `keygate token` refusing clearly, and no secret generated for an asymmetric setup.
import { afterAll, describe, expect, it } from 'bun:test';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportSPKI, generateKeyPair } from 'jose';
import { createJwtAuthority } from '../../src/auth/jwt';

const root = mkdtempSync(join(tmpdir(), 'keygate-idp-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const cli = join(import.meta.dir, '../../src/cli.ts');
const JWKS = 'https://idp.example.com/.well-known/jwks.json';

function run(args: string[], env: Record<string, string>) {
  const result = Bun.spawnSync([process.execPath, cli, ...args], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: ':memory:', HOST: '127.0.0.1', PORT: '0', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
    timeout: 10_000, // a server that starts anyway would run on: that is the failure tested for
  });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

function expectOneLine(result: ReturnType<typeof run>, pattern: RegExp) {
  expect(result.code).toBe(2);
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
}

describe('keygate token', () => {
  it.each([
    ['JWT_JWKS_URL', { JWT_JWKS_URL: JWKS }],
    ['JWT_PUBLIC_KEY', { JWT_PUBLIC_KEY: 'set below' }],
  ])('refuses to mint with %s: exit 2, one line saying why', async (setting, env) => {
    const settings =
      setting === 'JWT_PUBLIC_KEY'
        ? {
            JWT_PUBLIC_KEY: await exportSPKI(
              (await generateKeyPair('ES256', { extractable: true })).publicKey,
            ),
          }
        : env;
    expectOneLine(
      run(['token'], settings), // said before any flag is checked
      new RegExp(
        `^keygate: keygate token signs only HS256 tokens with JWT_SECRET; with ${setting} set, tokens come from your identity provider\\.$`,
      ),
    );
  });

  it('refuses a --ttl beyond MAX_EXPIRES_IN_SECONDS, which the server would refuse', () => {
    const env = { JWT_SECRET: 'x'.repeat(32), MAX_EXPIRES_IN_SECONDS: '60' };
    expectOneLine(
      run(['token', '--sub', '1', '--ttl', '61'], env),
      /--ttl must be an integer from 1 to 60\.$/,
    );
    expect(run(['token', '--sub', '1', '--ttl', '60'], env).code).toBe(0);
  });

  it('mints with the secret read from JWT_SECRET_FILE', async () => {
    const secret = 'a-secret-kept-in-a-file-of-32-bytes-or-more';
    const path = join(root, 'jwt-secret.txt');
    writeFileSync(path, `${secret}\n`);
    const result = run(['token', '--sub', '7', '--level', '2'], { JWT_SECRET_FILE: path });
    expect(result.code).toBe(0);
    const check = await createJwtAuthority({ secret, clock: () => Date.now() }).verify(result.stdout.trim());
    expect(check).toMatchObject({ ok: true, identity: { subject: '7', level: 2 } });
  });
});

describe('keygate serve', () => {
  it.each<[string, Record<string, string>, RegExp]>([
    [
      'two key sources',
      { JWT_SECRET: 'x'.repeat(32), JWT_JWKS_URL: JWKS },
      /Set only one token key source; got JWT_SECRET and JWT_JWKS_URL\.$/,
    ],
    [
      'HS256 in JWT_ALGORITHMS',
      { JWT_JWKS_URL: JWKS, JWT_ALGORITHMS: 'RS256,HS256' },
      /HMAC algorithm is never accepted/,
    ],
    ['none in JWT_ALGORITHMS', { JWT_JWKS_URL: JWKS, JWT_ALGORITHMS: 'none' }, /"none" is never accepted/],
    [
      'an unreadable JWT_SECRET_FILE',
      { JWT_SECRET_FILE: join(root, 'missing') },
      /JWT_SECRET_FILE: cannot read .*missing \(ENOENT\)\.$/,
    ],
    [
      'both DATABASE_URL and its file',
      { DATABASE_URL_FILE: join(root, 'missing') },
      /Set DATABASE_URL or DATABASE_URL_FILE, not both\.$/,
    ],
  ])('stops at %s: exit 2, one line', (_, env, pattern) => {
    expectOneLine(run(['serve'], env), pattern);
  });

  it('creates no JWT secret when tokens come from an identity provider', async () => {
    const data = mkdtempSync(join(root, 'data-'));
    const server = Bun.spawn([process.execPath, cli, 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: join(data, 'keygate.db'),
        JWT_JWKS_URL: JWKS,
        HOST: '127.0.0.1',
        PORT: '0',
      },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    try {
      const reader = server.stdout.getReader();
      let seen = '';
      while (!seen.includes('"msg":"listening"')) {
        const { value, done } = await reader.read();
        if (done) break;
        seen += new TextDecoder().decode(value);
      }
      expect(seen).toContain('"msg":"listening"');
      expect(existsSync(join(data, 'keygate.db'))).toBe(true);
      expect(existsSync(join(data, 'jwt-secret'))).toBe(false);
    } finally {
      server.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    }
  });
});
