// A mistyped setting (PROT=4350) is named at start-up and by `keygate config`, one line per variable,
// with the setting it is near; the ordinary environment of a shell, a container or systemd is not.
import { afterAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { editDistance, settingMeant, unknownSettingWarnings } from '../../src/cli/unknown-settings';

const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts');
const scratch = mkdtempSync(join(tmpdir(), 'keygate-unknown-settings-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** What a shell, a container, Kubernetes and systemd put in a process's environment. */
const TYPICAL_ENVIRONMENT = Object.fromEntries(
  [
    'PATH',
    'HOME',
    'HOSTNAME',
    'PWD',
    'OLDPWD',
    'USER',
    'LOGNAME',
    'SHELL',
    'SHLVL',
    'TERM',
    'LANG',
    'LANGUAGE',
    'LC_ALL',
    'TZ',
    'TMPDIR',
    'MAIL',
    'EDITOR',
    'PAGER',
    'DISPLAY',
    'COLORTERM',
    'LS_COLORS',
    'XDG_RUNTIME_DIR',
    'XDG_SESSION_ID',
    'SSH_AUTH_SOCK',
    'SSH_CLIENT',
    'SSH_CONNECTION',
    'SSH_TTY',
    'DBUS_SESSION_BUS_ADDRESS',
    'INVOCATION_ID',
    'JOURNAL_STREAM',
    'NOTIFY_SOCKET',
    'SYSTEMD_EXEC_PID',
    'MAINPID',
    'STATE_DIRECTORY',
    'RUNTIME_DIRECTORY',
    'CREDENTIALS_DIRECTORY',
    'LISTEN_FDS',
    'container',
    'KUBERNETES_SERVICE_HOST',
    'KUBERNETES_SERVICE_PORT',
    'KUBERNETES_PORT',
    'KEYGATE_PORT',
    'KEYGATE_SERVICE_HOST',
    'NODE_ENV',
    'BUN_INSTALL',
    'NO_COLOR',
    'FORCE_COLOR',
    'HTTP_PROXY',
    'HTTPS_PROXY',
    'NO_PROXY',
    'SSL_CERT_FILE',
    'DEBIAN_FRONTEND',
    '_',
  ].map((name) => [name, 'x']),
);

describe('which variables are named', () => {
  it('names nothing in a typical environment, nor the settings themselves', () => {
    expect(unknownSettingWarnings(TYPICAL_ENVIRONMENT)).toEqual([]);
    expect(unknownSettingWarnings({ ...TYPICAL_ENVIRONMENT, PORT: '1', JWT_SECRET_FILE: 'x' })).toEqual([]);
  });

  it.each([
    ['PROT', 'PORT'],
    ['HOTS', 'HOST'],
    ['PORTS', 'PORT'],
    ['LOGLEVEL', 'LOG_LEVEL'],
    ['DATABASE_URI', 'DATABASE_URL'],
    ['JWT_SECRET_FIEL', 'JWT_SECRET_FILE'],
    ['METRIC_PORT', 'METRICS_PORT'],
    ['jwt_secret', 'JWT_SECRET'],
    ['Port', 'PORT'],
  ])('names %s as a near miss of %s', (variable, setting) => {
    expect(settingMeant(variable)).toBe(setting as never);
    expect(unknownSettingWarnings({ [variable]: 'x' })).toEqual([
      `unknown setting ${variable}: did you mean ${setting}?`,
    ]);
  });

  it.each(['HOME', 'JWT_ISS', 'DATABASE_PORT', 'METRICS_PATH', 'portal'])('leaves %s alone', (variable) => {
    expect(settingMeant(variable)).toBeUndefined();
  });

  it('counts an adjacent swap as one edit (Damerau-Levenshtein)', () => {
    expect(editDistance('PROT', 'PORT')).toBe(1);
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('HOME', 'HOST')).toBe(2);
  });
});

describe('where they are named', () => {
  const env = (extra: Record<string, string>) => ({
    PATH: process.env.PATH ?? '',
    HOME: scratch,
    DATABASE_URL: ':memory:',
    JWT_SECRET: 'unknown-settings-test-secret-32-bytes-long',
    ...extra,
  });

  it('keygate config: one line each on stderr, the settings on stdout as before', () => {
    const result = Bun.spawnSync([process.execPath, CLI, 'config'], {
      cwd: scratch,
      env: env({ PROT: '4350', LOGLEVEL: 'debug' }),
    });
    expect(result.exitCode).toBe(0);
    expect(result.stderr.toString()).toBe(
      'keygate: unknown setting LOGLEVEL: did you mean LOG_LEVEL?\nkeygate: unknown setting PROT: did you mean PORT?\n',
    );
    expect(result.stdout.toString()).toContain('PORT=3000');
  });

  it('keygate serve: a warn line each before it listens', async () => {
    const server = Bun.spawn([process.execPath, CLI, 'serve'], {
      cwd: scratch,
      env: env({ PROT: '4350', HOST: '127.0.0.1', PORT: '0' }),
      stdout: 'pipe',
      stderr: 'pipe',
    });
    let output = '';
    const decoder = new TextDecoder();
    for await (const chunk of server.stdout) {
      output += decoder.decode(chunk);
      if (output.includes('"listening"')) break;
    }
    server.kill('SIGTERM');
    await server.exited;
    const lines = output
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines[0]).toMatchObject({ level: 'warn', msg: 'unknown setting PROT: did you mean PORT?' });
    expect(lines.filter((line) => line.level === 'warn')).toHaveLength(1);
    expect(lines.at(-1)).toMatchObject({ msg: 'listening' });
  });
});
