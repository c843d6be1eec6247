// Nothing keygate prints holds a password, secret or token (but the token `keygate token` was asked
// for): every command, and bad settings, run with secret-bearing settings given every way keygate
// takes them (environment, flag, *_FILE), and everything they write is searched for those secrets.
import { afterAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readStartLine } from '../support/binary';

const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts');
const scratch = mkdtempSync(join(tmpdir(), 'keygate-secrets-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const PASSWORD = 'pg-password-never-printed';
const FILE_PASSWORD = 'pg-password-from-a-file-never-printed';
const JWT_SECRET = 'jwt-secret-never-printed-0123456789abcdef';
const FILE_JWT_SECRET = 'jwt-secret-from-a-file-never-printed-0123456789';
const SECRETS = [PASSWORD, FILE_PASSWORD, JWT_SECRET, FILE_JWT_SECRET];

/** Nothing listens on port 1: every PostgreSQL command fails to connect, and says so. */
const POSTGRES_URL = `postgres://keygate:${PASSWORD}@127.0.0.1:1/keygate`;
const file = (name: string, text: string) => {
  const path = join(scratch, name);
  writeFileSync(path, text, { mode: 0o600 });
  return path;
};
const DATABASE_URL_FILE = file('database-url', `postgresql://keygate:${FILE_PASSWORD}@127.0.0.1:1/kg\n`);
const JWT_SECRET_FILE = file('jwt-secret-file', `${FILE_JWT_SECRET}\n`);

const SETTINGS: Record<string, Record<string, string>> = {
  'PostgreSQL URL and JWT_SECRET in the environment': { DATABASE_URL: POSTGRES_URL, JWT_SECRET },
  'both from files': { DATABASE_URL_FILE, JWT_SECRET_FILE },
  'PostgreSQL URL without JWT_SECRET': { DATABASE_URL: POSTGRES_URL },
  'SQLite and JWT_SECRET_FILE': { DATABASE_URL: join(scratch, 'sqlite', 'keygate.db'), JWT_SECRET_FILE },
};

/** Bad settings, each with a secret beside it or inside it. */
const BAD_SETTINGS: Record<string, Record<string, string>> = {
  'JWT_SECRET and JWT_SECRET_FILE both': { DATABASE_URL: POSTGRES_URL, JWT_SECRET, JWT_SECRET_FILE },
  'DATABASE_URL and DATABASE_URL_FILE both': { DATABASE_URL: POSTGRES_URL, DATABASE_URL_FILE },
  'a MySQL URL with a password': { DATABASE_URL: `mysql://root:${PASSWORD}@db/keygate`, JWT_SECRET },
  'an unparsable PostgreSQL URL': { DATABASE_URL: `postgres://keygate:${PASSWORD}#x@db/k`, JWT_SECRET },
  'a JWT_SECRET too short': { DATABASE_URL: POSTGRES_URL, JWT_SECRET: PASSWORD.slice(0, 20) },
  'a bad PORT beside secrets': { DATABASE_URL: POSTGRES_URL, JWT_SECRET, PORT: 'abc' },
  'two key sources': { JWT_SECRET, JWT_JWKS_URL: 'https://idp.example.com/jwks' },
};

const COMMANDS = [
  ['config'],
  ['token', '--sub', '42', '--ttl', '0'],
  ['token', '--sub', '42', '--level', '9'],
  ['purge'],
  ['migrate'],
  ['backup', join(scratch, 'never.db')],
  ['healthcheck', '--port', '1'],
  ['serve', '--host', '127.0.0.1', '--port', '0'],
  ['--help'],
  ['serve', '--help'],
  ['--version'],
  ['frobnicate'],
];

/** Everything one run writes, stdout then stderr; a run that would not stop in 10 s is killed. */
async function run(args: string[], env: Record<string, string>): Promise<string> {
  const child = Bun.spawn([process.execPath, CLI, ...args], {
    cwd: scratch,
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'debug', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
    timeout: 10_000,
  });
  const [stdout, stderr] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ]);
  await child.exited;
  return `${stdout}${stderr}`;
}

function expectNoSecret(output: string) {
  for (const secret of SECRETS) expect(output).not.toContain(secret);
  expect(output).not.toContain(encodeURIComponent(PASSWORD).slice(0, 12));
}

describe('what keygate prints', () => {
  it.each(Object.entries(SETTINGS))(
    'holds no secret, for every command, with %s',
    async (_, env) => {
      // A server that does start (SQLite) runs until stopped: that case is the test below.
      const commands = COMMANDS.filter(
        (args) => !(args[0] === 'serve' && args[1] !== '--help' && env.DATABASE_URL?.startsWith('/')),
      );
      const outputs = await Promise.all(commands.map((args) => run(args, env)));
      for (const [index, output] of outputs.entries()) {
        expect({ args: commands[index], printed: output !== '' }).toEqual({
          args: commands[index],
          printed: true,
        });
        expectNoSecret(output);
      }
    },
    60_000,
  );

  it.each(Object.entries(BAD_SETTINGS))(
    'holds no secret when refusing %s',
    async (_, env) => {
      // Every command reads its settings the same way first; these two show the refusal.
      const commands = [['serve'], ['config']];
      for (const output of await Promise.all(commands.map((args) => run(args, env)))) {
        expect(output).toStartWith('keygate: ');
        expectNoSecret(output);
      }
    },
    60_000,
  );

  it('holds no secret while serving and stopping, with the flags carrying the secrets', async () => {
    const server = Bun.spawn(
      [
        process.execPath,
        CLI,
        'serve',
        '--database-url',
        join(scratch, 'served', 'keygate.db'),
        '--jwt-secret',
        JWT_SECRET,
      ],
      {
        cwd: scratch,
        env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'debug', HOST: '127.0.0.1', PORT: '0' },
        stdout: 'pipe',
        stderr: 'pipe',
      },
    );
    const stdout = (server.stdout as ReadableStream<Uint8Array>).getReader();
    const start = await readStartLine(stdout);
    const base = start.url.replace(/\/$/, '');
    // A wrong secret and a bad token, which debug logging explains, and a good token's request.
    const token = (
      await run(['token', '--sub', '7', '--database-url', join(scratch, 'served', 'keygate.db')], {
        JWT_SECRET,
      })
    ).trim();
    expect(token.split('.')).toHaveLength(3);
    await fetch(`${base}/apikeys/jwt`, { headers: { authorization: `Bearer ${token}x` } });
    const created = await fetch(`${base}/apikeys/jwt`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'n', level: 1, expiresIn: 60 }),
    });
    const { apikey } = (await created.json()) as { apikey: { key: string; secret: string } };
    await fetch(`${base}/apikeys/key`, {
      headers: { authorization: `Basic ${btoa(`${apikey.key}:${apikey.secret}x`)}` },
    });
    server.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    let output = JSON.stringify(start);
    for (let chunk = await stdout.read(); !chunk.done; chunk = await stdout.read()) {
      output += new TextDecoder().decode(chunk.value);
    }
    output += await new Response(server.stderr as ReadableStream).text();
    expect(output).toContain('"msg":"stopped"');
    expectNoSecret(output);
    expect(output).not.toContain(token);
    expect(output).not.toContain(apikey.secret);
  }, 30_000);
});
