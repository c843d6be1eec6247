// Configuration: defaults, environment, flags over environment, and one clear line per bad value.
import { afterAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveJwtSecret } from '../src/auth/jwt-secret';
import { ConfigError, flagOf, loadConfig, settingOfFlag } from '../src/config';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-config-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('loadConfig', () => {
  it('has the contract defaults', () => {
    expect(loadConfig({})).toEqual({
      port: 3000,
      host: '0.0.0.0',
      databaseUrl: './data/keygate.db',
      jwtSecret: undefined,
      jwtIssuer: undefined,
      jwtAudience: undefined,
      basePath: '',
      purgeIntervalSeconds: 60,
      maxExpiresInSeconds: 315360000,
      maxKeysPerUser: 1000,
      keyCacheSeconds: 10,
      logLevel: 'info',
      idleTimeoutSeconds: 75,
      shutdownTimeoutSeconds: 8,
    });
  });

  it('reads the environment, lets flags win, and treats empty as unset', () => {
    const config = loadConfig(
      { PORT: '8080', HOST: '127.0.0.1', JWT_ISSUER: '', BASE_PATH: '/auth/' },
      { PORT: '9090' },
    );
    expect(config.port).toBe(9090);
    expect(config.host).toBe('127.0.0.1');
    expect(config.jwtIssuer).toBeUndefined();
    expect(config.basePath).toBe('/auth');
  });

  it('is frozen', () => {
    expect(Object.isFrozen(loadConfig({}))).toBe(true);
  });

  it.each([
    [{ PORT: 'abc' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ PORT: '-1' }, 'PORT'],
    [{ PORT: '80.5' }, 'PORT'],
    [{ JWT_SECRET: 'short' }, 'JWT_SECRET'],
    [{ BASE_PATH: 'auth' }, 'BASE_PATH'],
    [{ BASE_PATH: '/a b' }, 'BASE_PATH'],
    [{ BASE_PATH: '/../x' }, 'BASE_PATH'],
    [{ BASE_PATH: '/.' }, 'BASE_PATH'],
    [{ BASE_PATH: '/x/..' }, 'BASE_PATH'],
    [{ BASE_PATH: '/x/./y/' }, 'BASE_PATH'],
    [{ PURGE_INTERVAL_SECONDS: '0' }, 'PURGE_INTERVAL_SECONDS'],
    [{ MAX_EXPIRES_IN_SECONDS: '1e9' }, 'MAX_EXPIRES_IN_SECONDS'],
    [{ MAX_KEYS_PER_USER: '0' }, 'MAX_KEYS_PER_USER'],
    [{ KEY_CACHE_SECONDS: '3601' }, 'KEY_CACHE_SECONDS'],
    [{ KEY_CACHE_SECONDS: '-1' }, 'KEY_CACHE_SECONDS'],
    [{ KEY_CACHE_SECONDS: '1.5' }, 'KEY_CACHE_SECONDS'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ HOST: ' ' }, 'HOST'],
    [{ IDLE_TIMEOUT_SECONDS: '0' }, 'IDLE_TIMEOUT_SECONDS'],
    [{ IDLE_TIMEOUT_SECONDS: '256' }, 'IDLE_TIMEOUT_SECONDS'],
    [{ SHUTDOWN_TIMEOUT_SECONDS: '-1' }, 'SHUTDOWN_TIMEOUT_SECONDS'],
    [{ SHUTDOWN_TIMEOUT_SECONDS: '2.5' }, 'SHUTDOWN_TIMEOUT_SECONDS'],
  ])('rejects %p with one line naming %s', (env, name) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    try {
      loadConfig(env);
    } catch (error) {
      expect((error as Error).message.startsWith(name)).toBe(true);
      expect((error as Error).message).not.toContain('\n');
    }
  });

  it('takes KEY_CACHE_SECONDS from 0 to 3600', () => {
    expect(loadConfig({ KEY_CACHE_SECONDS: '0' }).keyCacheSeconds).toBe(0);
    expect(loadConfig({}, { KEY_CACHE_SECONDS: '3600' }).keyCacheSeconds).toBe(3600);
  });

  it('maps settings to flags and back', () => {
    expect(flagOf('DATABASE_URL')).toBe('--database-url');
    expect(settingOfFlag('--max-keys-per-user')).toBe('MAX_KEYS_PER_USER');
    expect(settingOfFlag('--nope')).toBeUndefined();
  });
});

describe('resolveJwtSecret', () => {
  it('uses JWT_SECRET when set', () => {
    expect(resolveJwtSecret({ jwtSecret: 'x'.repeat(32), databaseUrl: '/nonexistent/db' })).toBe(
      'x'.repeat(32),
    );
  });

  it('creates a random secret once beside the database, mode 0600, and reuses it', () => {
    const dir = mkdtempSync(join(scratch, 'secret-'));
    const config = { jwtSecret: undefined, databaseUrl: join(dir, 'sub', 'keygate.db') };
    const first = resolveJwtSecret(config);
    expect(Buffer.byteLength(first)).toBeGreaterThanOrEqual(32);
    expect(resolveJwtSecret(config)).toBe(first);
    const file = join(dir, 'sub', 'jwt-secret');
    expect(readFileSync(file, 'utf8').trim()).toBe(first);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('refuses a secret file that is too short', () => {
    const dir = mkdtempSync(join(scratch, 'secret-'));
    writeFileSync(join(dir, 'jwt-secret'), 'short\n');
    expect(() => resolveJwtSecret({ jwtSecret: undefined, databaseUrl: join(dir, 'k.db') })).toThrow(
      ConfigError,
    );
  });
});
