// Smoke test of the compiled binary: built as `bun run build` builds it, started from an empty
// directory with nothing beside it, it serves, mints tokens, and drains and exits 0 on SIGTERM.
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import journal from '../drizzle/meta/_journal.json' with { type: 'json' };
import pkg from '../package.json' with { type: 'json' };
import { buildBinary, readStartLine } from './support/binary';
import { reachesDatabaseFile } from './support/database-file';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-binary-'));
const binary = join(scratch, 'keygate');
/** A fresh working directory inside the scratch one, so afterAll removes everything at once. */
const emptyDir = (label: string) => mkdtempSync(join(scratch, `${label}-`));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

beforeAll(() => buildBinary(binary), 60_000);

function run(args: string[], cwd: string, env: Record<string, string> = {}) {
  const result = Bun.spawnSync([binary, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    stderr: 'pipe',
  });
  return {
    code: result.exitCode,
    stdout: result.stdout.toString().trim(),
    stderr: result.stderr.toString().trim(),
  };
}

describe('dist/keygate', () => {
  let server: ReturnType<typeof Bun.spawn> | undefined;
  afterAll(() => server?.kill('SIGKILL'));

  it('serves from an empty directory, mints a working token, creates, deletes, and exits 0 on SIGTERM', async () => {
    const cwd = emptyDir('empty');
    server = Bun.spawn([binary], {
      cwd,
      env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', METRICS_PORT: '0' },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const reader = (server.stdout as ReadableStream<Uint8Array>).getReader();
    const startLine = await readStartLine(reader);
    // The start-up line names the file opened, made absolute.
    expect(startLine).toMatchObject({ msg: 'listening', database: join(cwd, 'data', 'keygate.db') });
    expect(startLine.metrics).toStartWith('http://127.0.0.1:');
    const base = startLine.url.replace(/\/$/, '');

    expect(existsSync(join(cwd, 'data', 'keygate.db'))).toBe(true);
    expect(statSync(join(cwd, 'data', 'jwt-secret')).mode & 0o777).toBe(0o600);

    const token = run(['token', '--sub', '42', '--level', '5'], cwd).stdout;
    expect(token.split('.')).toHaveLength(3);
    const created = await fetch(`${base}/apikeys/jwt`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'smoke', level: 5, expiresIn: 60 }),
    });
    expect(created.status).toBe(201);
    const { apikey } = (await created.json()) as { apikey: { key: string; secret: string; userId: number } };
    expect(apikey.userId).toBe(42);
    // The checkpoint thread runs inside the binary: the commit reaches the database file at once.
    expect(await reachesDatabaseFile(join(cwd, 'data', 'keygate.db'), apikey.key)).toBe(true);

    const deleted = await fetch(`${base}/apikeys/${apikey.key}/key`, {
      method: 'DELETE',
      headers: { authorization: `Basic ${btoa(`${apikey.key}:${apikey.secret}`)}` },
    });
    expect(deleted.status).toBe(204);

    // The reference page's files come from inside the binary (the directory is empty).
    const bundle = await fetch(`${base}/openapi/swagger-ui-bundle.js`);
    expect(bundle.status).toBe(200);
    expect((await bundle.arrayBuffer()).byteLength).toBe(
      Bun.file(join(import.meta.dir, '..', 'node_modules', 'swagger-ui-dist', 'swagger-ui-bundle.js')).size,
    );
    const metrics = await (await fetch(startLine.metrics as string)).text();
    expect(metrics).toContain('keygate_keys_created_total 1\n');
    expect(metrics).toContain('keygate_keys_deleted_total{reason="revoked"} 1\n');

    expect(run(['healthcheck', '--port', new URL(base).port], cwd).code).toBe(0);

    server.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    let rest = '';
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      rest += new TextDecoder().decode(chunk.value);
    }
    expect(rest).toContain('"msg":"stopped"');
    expect(rest).not.toContain(apikey.secret);
    expect(rest).not.toContain(token);
  }, 30_000);

  it('finishes a request in flight when SIGTERM arrives, then exits 0', async () => {
    const cwd = emptyDir('drain');
    const env = { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', JWT_SECRET: 'x'.repeat(32) };
    const proc = Bun.spawn([binary], { cwd, env, stdout: 'pipe' });
    const lines = (proc.stdout as ReadableStream<Uint8Array>).getReader();
    const port = new URL((await readStartLine(lines)).url).port;
    const token = run(['token', '--sub', '1'], cwd, env).stdout;
    const body = JSON.stringify({ name: 'in flight', level: 1, expiresIn: 60 });
    let answer = '';
    const socket = await Bun.connect({
      hostname: '127.0.0.1',
      port: Number(port),
      socket: {
        data(_, chunk) {
          answer += new TextDecoder().decode(chunk);
        },
      },
    });
    socket.write(
      `POST /apikeys/jwt HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
    );
    // Half the body is on its way. Once another connection's request is answered, the server's loop
    // has read those bytes (they were there first), so the request is in flight when the signal comes.
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    proc.kill('SIGTERM');
    for (let chunk = await lines.read(); !chunk.done; chunk = await lines.read()) {
      if (new TextDecoder().decode(chunk.value).includes('"msg":"stopping"')) break;
    }
    socket.write(body.slice(10));
    expect(await proc.exited).toBe(0);
    socket.end();
    expect(answer).toStartWith('HTTP/1.1 201');
  }, 30_000);

  it('on SIGTERM, closes a request whose body never completes after SHUTDOWN_TIMEOUT_SECONDS, then exits 0', async () => {
    const cwd = emptyDir('stuck');
    const env = {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      HOST: '127.0.0.1',
      JWT_SECRET: 'x'.repeat(32),
      SHUTDOWN_TIMEOUT_SECONDS: '1',
      // Far beyond this test's own limit: only the shutdown bound can end the stuck request in time.
      IDLE_TIMEOUT_SECONDS: '200',
    };
    const proc = Bun.spawn([binary], { cwd, env, stdout: 'pipe' });
    const lines = (proc.stdout as ReadableStream<Uint8Array>).getReader();
    const port = new URL((await readStartLine(lines)).url).port;
    const token = run(['token', '--sub', '1'], cwd, env).stdout;
    let answer = '';
    let serverClosed: () => void = () => {};
    const closed = new Promise<void>((resolve) => {
      serverClosed = resolve;
    });
    let sawContinue: () => void = () => {};
    const continued = new Promise<void>((resolve) => {
      sawContinue = resolve;
    });
    const socket = await Bun.connect({
      hostname: '127.0.0.1',
      port: Number(port),
      socket: {
        data(_, chunk) {
          answer += new TextDecoder().decode(chunk);
          if (answer.includes('100 Continue')) sawContinue();
        },
        close() {
          serverClosed();
        },
      },
    });
    // The 100 Continue says the server has started this request; the 100 bytes it announces never come.
    socket.write(
      `POST /apikeys/jwt HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
        'Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n{"name":',
    );
    await continued;
    proc.kill('SIGTERM');
    let log = '';
    for (let chunk = await lines.read(); !chunk.done; chunk = await lines.read()) {
      log += new TextDecoder().decode(chunk.value);
    }
    expect(await proc.exited).toBe(0);
    expect(log).toContain('"msg":"closing connections still open"');
    expect(log).toContain('"msg":"stopped"');
    await closed; // the server closed the stuck connection (otherwise this test times out)
    expect(answer).not.toContain('201');
  }, 30_000);

  it('refuses to start on a port another keygate already serves (exit 2, one line)', async () => {
    const cwd = emptyDir('port');
    const env = { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', JWT_SECRET: 'x'.repeat(32) };
    const first = Bun.spawn([binary], { cwd, env, stdout: 'pipe' });
    const port = new URL((await readStartLine((first.stdout as ReadableStream<Uint8Array>).getReader())).url)
      .port;
    const second = run(['serve', '--database-url', join(cwd, 'other.db')], cwd, { ...env, PORT: port });
    first.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(second.code).toBe(2);
    expect(second.stderr.split('\n')).toHaveLength(1);
    expect(second.stderr).toContain(port);
  }, 30_000);

  it('prints its version and help', () => {
    const cwd = emptyDir('empty');
    // The commit is defined at build time (scripts/ci/build.ts), from this checkout.
    const git = Bun.spawnSync(['git', 'rev-parse', 'HEAD'], {
      cwd: import.meta.dir,
      stdout: 'pipe',
      stderr: 'ignore',
    });
    const commit = git.exitCode === 0 ? git.stdout.toString().trim() : 'unknown';
    expect(run(['--version'], cwd).stdout).toBe(
      `keygate ${pkg.version} (commit ${commit}, bun ${Bun.version})`,
    );
    expect(run(['--help'], cwd).stdout).toContain('MAX_KEYS_PER_USER');
  });

  it.each([
    [['serve'], { PORT: 'abc' }, 'PORT'],
    [['serve', '--log-level', 'loud'], {}, 'LOG_LEVEL'],
    [['serve', '--bogus'], {}, '--bogus'],
    [['frobnicate'], {}, 'frobnicate'],
    [['token'], { JWT_SECRET: 'x'.repeat(32) }, '--sub'],
  ])('exits 2 with one clear line for %p %p', (args, env, mentions) => {
    const cwd = emptyDir('empty');
    const result = run(args, cwd, env);
    expect(result.code).toBe(2);
    expect(result.stderr.split('\n')).toHaveLength(1);
    expect(result.stderr).toContain(mentions);
  });

  it('exits 2 with one line when the database file is not a database, and leaves it untouched', async () => {
    const cwd = emptyDir('corrupt');
    const file = join(cwd, 'keygate.db');
    await Bun.write(file, 'this is not a SQLite database, not even close to one. '.repeat(200));
    const before = await Bun.file(file).text();
    const result = run(['serve', '--database-url', file, '--port', '0'], cwd, { JWT_SECRET: 'x'.repeat(32) });
    expect(result.code).toBe(2);
    expect(result.stderr.split('\n')).toHaveLength(1);
    expect(await Bun.file(file).text()).toBe(before);
  });

  it('reads no .env file and no bunfig.toml from its working directory', async () => {
    const cwd = emptyDir('dotenv');
    await Bun.write(join(cwd, '.env'), 'PORT=4321\nJWT_SECRET=from-a-dotenv-file-at-least-32-bytes\n');
    await Bun.write(join(cwd, '.env.local'), 'LOG_LEVEL=debug\n');
    await Bun.write(join(cwd, '.env.production'), 'HOST=127.0.0.1\n');
    await Bun.write(join(cwd, 'bunfig.toml'), 'preload = ["./preload.ts"]\n');
    await Bun.write(join(cwd, 'preload.ts'), `await Bun.write(${JSON.stringify(join(cwd, 'ran'))}, 'x');\n`);
    const result = run(['config'], cwd, { NODE_ENV: 'production' });
    expect(result.code).toBe(0);
    const lines = result.stdout.split('\n');
    expect(lines).toContainEqual(expect.stringMatching(/^PORT=3000 +\(default\)$/));
    expect(lines).toContainEqual(expect.stringMatching(/^HOST=0\.0\.0\.0 +\(default\)$/));
    expect(lines).toContainEqual(expect.stringMatching(/^LOG_LEVEL=info +\(default\)$/));
    expect(lines).toContainEqual(expect.stringMatching(/^JWT_SECRET=<unset: /));
    expect(existsSync(join(cwd, 'ran'))).toBe(false);
  });

  it('purges and migrates by hand', () => {
    const cwd = emptyDir('empty');
    expect(run(['migrate'], cwd).stdout).toContain(`migration ${journal.entries.length}`);
    expect(run(['purge'], cwd).stdout).toBe('purged 0 expired keys');
  });
});
