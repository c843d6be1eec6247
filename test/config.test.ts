// Configuration: defaults, environment, flags over environment, and one clear line per bad value.
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportPKCS8, exportSPKI, generateKeyPair } from 'jose';
import {
  ConfigError,
  type DatabaseChoice,
  flagOf,
  loadConfig,
  parseDatabaseUrl,
  settingOfFlag,
} from '../src/config';
import { resolveJwtSecret } from '../src/jwt-secret';
import { parseAddress } from '../src/network/address';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-config-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const sqlite = (path: string): DatabaseChoice => ({ engine: 'sqlite', path });

describe('loadConfig', () => {
  it('has the contract defaults', () => {
    expect(loadConfig({})).toEqual({
      port: 3000,
      host: '0.0.0.0',
      database: { engine: 'sqlite', path: join(process.cwd(), 'data', 'keygate.db') },
      databasePoolSize: 10,
      jwtSecret: undefined,
      jwtKeySource: 'secret',
      jwtJwksUrl: undefined,
      jwtPublicKey: undefined,
      jwtAlgorithms: ['HS256'],
      jwtClockToleranceSeconds: 0,
      jwtIssuer: undefined,
      jwtAudience: undefined,
      jwtUserIds: 'numeric',
      jwtAdminScope: 'keygate:admin',
      basePath: '',
      purgeIntervalSeconds: 60,
      maxExpiresInSeconds: 315360000,
      maxKeysPerUser: 1000,
      keyCacheSeconds: 10,
      logLevel: 'info',
      metricsPort: undefined,
      metricsHost: '127.0.0.1',
      idleTimeoutSeconds: 75,
      shutdownTimeoutSeconds: 8,
      usageFlushSeconds: 10,
      usageRetentionDays: 90,
      rateLimit: undefined,
      trustedProxies: '',
      trustedProxyList: expect.any(Object),
      forwardAuthRules: undefined,
      forwardAuthDefault: 'credential',
      secretPrefix: 'kgs_',
      githubSecretScanning: false,
      githubSecretScanningKeysUrl: 'https://api.github.com/meta/public_keys/secret_scanning',
      leakAction: 'disable',
      console: true,
      consoleSessionSeconds: 3600,
      publicUrl: undefined,
      consoleFrameAncestors: "'none'",
      consoleTitle: 'keygate',
      consoleAccent: '#2563eb',
      webhookAllowPrivate: false,
      webhookExpiringLeadMs: [7 * 86_400_000, 86_400_000],
      webhookRetentionDays: 7,
    });
  });

  it('takes SECRET_PREFIX of 2 to 16 characters of a-z 0-9 _ ending in _, and refuses others in one line', () => {
    for (const prefix of ['a_', 'acme_', 'acme_prod_', '0123456789abcde_', '__']) {
      expect(loadConfig({ SECRET_PREFIX: prefix }).secretPrefix).toBe(prefix);
    }
    for (const prefix of ['_', 'acme', 'Acme_', 'acme-', 'ac-me_', '0123456789abcdef_', 'ac me_', 'é_']) {
      expect(() => loadConfig({ SECRET_PREFIX: prefix })).toThrow(
        new ConfigError(
          `SECRET_PREFIX must be 2 to 16 characters of a-z, 0-9 and _, ending in _ (got "${prefix}").`,
        ),
      );
    }
  });

  it('reads GITHUB_SECRET_SCANNING (on/off), its keys URL (http(s)) and LEAK_ACTION', () => {
    const config = loadConfig({
      GITHUB_SECRET_SCANNING: 'on',
      GITHUB_SECRET_SCANNING_KEYS_URL: 'http://127.0.0.1:9/keys',
      LEAK_ACTION: 'notify',
    });
    expect(config.githubSecretScanning).toBe(true);
    expect(config.githubSecretScanningKeysUrl).toBe('http://127.0.0.1:9/keys');
    expect(config.leakAction).toBe('notify');
    expect(() => loadConfig({ GITHUB_SECRET_SCANNING: 'yes' })).toThrow(
      'GITHUB_SECRET_SCANNING must be on or off (got "yes").',
    );
    expect(() => loadConfig({ GITHUB_SECRET_SCANNING_KEYS_URL: 'ftp://x/keys' })).toThrow(
      'GITHUB_SECRET_SCANNING_KEYS_URL must be an http(s) URL (got "ftp://x/keys").',
    );
    expect(() => loadConfig({ LEAK_ACTION: 'revoke' })).toThrow(
      'LEAK_ACTION must be disable, delete or notify (got "revoke").',
    );
  });

  it('checks the console settings, one line each', () => {
    const config = loadConfig({
      CONSOLE: 'off',
      CONSOLE_SESSION_SECONDS: '600',
      PUBLIC_URL: 'https://keys.example.com/',
      CONSOLE_FRAME_ANCESTORS: "'self' https://app.example.com",
      CONSOLE_TITLE: 'Acme <keys>',
      CONSOLE_ACCENT: 'rgb(10 20 30)',
    });
    expect(config).toMatchObject({
      console: false,
      consoleSessionSeconds: 600,
      publicUrl: 'https://keys.example.com',
      consoleFrameAncestors: "'self' https://app.example.com",
      consoleTitle: 'Acme <keys>',
      consoleAccent: 'rgb(10 20 30)',
    });
    for (const [name, value, problem] of [
      ['CONSOLE', 'yes', 'CONSOLE must be on or off'],
      ['CONSOLE_SESSION_SECONDS', '59', 'CONSOLE_SESSION_SECONDS must be an integer from 60 to 86400'],
      ['PUBLIC_URL', 'https://keys.example.com/console', 'PUBLIC_URL must be an http(s) origin'],
      ['PUBLIC_URL', 'ftp://keys.example.com', 'PUBLIC_URL must be an http(s) origin'],
      ['CONSOLE_FRAME_ANCESTORS', "'none'; script-src *", 'CONSOLE_FRAME_ANCESTORS must be'],
      ['CONSOLE_TITLE', 'a\u0007b', 'CONSOLE_TITLE must be 1 to 80 characters'],
      ['CONSOLE_ACCENT', 'red; } body { display: none', 'CONSOLE_ACCENT must be a CSS colour'],
      ['CONSOLE_ACCENT', 'url(https://evil.example/x)', 'CONSOLE_ACCENT must be a CSS colour'],
    ] as const) {
      expect(() => loadConfig({ [name]: value }), `${name}=${value}`).toThrow(problem);
    }
  });

  it('refuses bad webhook settings in one line each', () => {
    expect(() => loadConfig({ WEBHOOK_ALLOW_PRIVATE: 'yes' })).toThrow(
      'WEBHOOK_ALLOW_PRIVATE must be true or false (got "yes").',
    );
    expect(() => loadConfig({ WEBHOOK_EXPIRING_LEAD: '7d,soon' })).toThrow(
      'WEBHOOK_EXPIRING_LEAD must be a comma list of <n>s, <n>m, <n>h or <n>d, e.g. 7d,1d: "soon" is not <n>s, <n>m, <n>h or <n>d (got "7d,soon").',
    );
    expect(() => loadConfig({ WEBHOOK_RETENTION_DAYS: '0' })).toThrow(
      'WEBHOOK_RETENTION_DAYS must be an integer from 1 to 3650 (got "0").',
    );
    expect(loadConfig({ WEBHOOK_EXPIRING_LEAD: '1h, 30m,1h' }).webhookExpiringLeadMs).toEqual([
      3_600_000, 1_800_000,
    ]);
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
    [{ USAGE_FLUSH_SECONDS: '0' }, 'USAGE_FLUSH_SECONDS'],
    [{ USAGE_FLUSH_SECONDS: '301' }, 'USAGE_FLUSH_SECONDS'],
    [{ USAGE_RETENTION_DAYS: '0' }, 'USAGE_RETENTION_DAYS'],
    [{ USAGE_RETENTION_DAYS: '3651' }, 'USAGE_RETENTION_DAYS'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ JWT_ADMIN_SCOPE: 'keygate admin' }, 'JWT_ADMIN_SCOPE'],
    [{ JWT_ADMIN_SCOPE: 'keygate"admin' }, 'JWT_ADMIN_SCOPE'],
    [{ HOST: ' ' }, 'HOST'],
    [{ METRICS_PORT: 'abc' }, 'METRICS_PORT'],
    [{ METRICS_PORT: '65536' }, 'METRICS_PORT'],
    [{ METRICS_PORT: '-1' }, 'METRICS_PORT'],
    [{ METRICS_PORT: '3000' }, 'METRICS_PORT'],
    [{ PORT: '9000', METRICS_PORT: '9000' }, 'METRICS_PORT'],
    [{ METRICS_PORT: '9100', METRICS_HOST: ' ' }, 'METRICS_HOST'],
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

  it('leaves metrics off unless METRICS_PORT is set, on 127.0.0.1 by default', () => {
    expect(loadConfig({ METRICS_PORT: '' }).metricsPort).toBeUndefined();
    expect(loadConfig({ METRICS_PORT: '9100' })).toMatchObject({
      metricsPort: 9100,
      metricsHost: '127.0.0.1',
    });
    expect(loadConfig({}, { METRICS_PORT: '0', METRICS_HOST: '::1' })).toMatchObject({
      metricsPort: 0,
      metricsHost: '::1',
    });
  });

  it('takes USAGE_FLUSH_SECONDS from 1 to 300 and USAGE_RETENTION_DAYS from 1 to 3650', () => {
    expect(loadConfig({ USAGE_FLUSH_SECONDS: '1' }).usageFlushSeconds).toBe(1);
    expect(loadConfig({}, { USAGE_FLUSH_SECONDS: '300' }).usageFlushSeconds).toBe(300);
    expect(loadConfig({ USAGE_RETENTION_DAYS: '1' }).usageRetentionDays).toBe(1);
    expect(loadConfig({}, { USAGE_RETENTION_DAYS: '3650' }).usageRetentionDays).toBe(3650);
  });

  it('reads RATE_LIMIT as <limit>/<duration> within a key limit’s bounds, and refuses anything else', () => {
    expect(loadConfig({}).rateLimit).toBeUndefined();
    expect(loadConfig({ RATE_LIMIT: '1000/60' }).rateLimit).toEqual({ limit: 1000, duration: 60 });
    expect(loadConfig({ RATE_LIMIT: '1000000/86400' }).rateLimit).toEqual({
      limit: 1_000_000,
      duration: 86_400,
    });
    for (const bad of [
      '0/60',
      '1/0',
      '1000001/1',
      '1/86401',
      '10',
      '10/',
      '/60',
      '1.5/60',
      '10/60s',
      ' 10/60',
    ]) {
      expect(() => loadConfig({ RATE_LIMIT: bad })).toThrow('RATE_LIMIT must be <limit>/<duration>');
    }
  });

  it('reads TRUSTED_PROXIES as a comma list of addresses and blocks, and refuses anything else', () => {
    const config = loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8, 192.0.2.7,::1' });
    expect(config.trustedProxies).toBe('10.0.0.0/8, 192.0.2.7,::1');
    expect(config.trustedProxyList.contains(parseAddress('10.9.8.7'))).toBe(true);
    expect(config.trustedProxyList.contains(parseAddress('192.0.2.8'))).toBe(false);
    expect(loadConfig({}).trustedProxyList.contains(parseAddress('127.0.0.1'))).toBe(false);
    for (const bad of ['10.0.0.0/33', 'proxy.local', '10.0.0.1,,10.0.0.2', '10.0.0.1,']) {
      expect(() => loadConfig({ TRUSTED_PROXIES: bad })).toThrow('TRUSTED_PROXIES');
    }
  });

  it('reads FORWARD_AUTH_DEFAULT as credential or deny, and FORWARD_AUTH_RULES_FILE as a checked file', () => {
    expect(loadConfig({ FORWARD_AUTH_DEFAULT: 'deny' }).forwardAuthDefault).toBe('deny');
    expect(() => loadConfig({ FORWARD_AUTH_DEFAULT: 'allow' })).toThrow('FORWARD_AUTH_DEFAULT must be');
    const good = join(scratch, 'rules.json');
    writeFileSync(good, '[{"path": "/docs/*", "permissions": "docs.read"}]');
    expect(loadConfig({ FORWARD_AUTH_RULES_FILE: good }).forwardAuthRules?.rules).toHaveLength(1);
    const bad = join(scratch, 'bad-rules.json');
    writeFileSync(bad, '[{"path": "/docs/*"}, {"path": "/x", "allow": "everyone"}]');
    expect(() => loadConfig({ FORWARD_AUTH_RULES_FILE: bad })).toThrow('rule 2');
    expect(() => loadConfig({ FORWARD_AUTH_RULES_FILE: join(scratch, 'missing.json') })).toThrow(
      'cannot read',
    );
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

describe('DATABASE_URL', () => {
  it.each([
    ['/var/lib/keygate/keygate.db', '/srv', sqlite('/var/lib/keygate/keygate.db')],
    ['/var/lib/keygate/../keygate/k.db', '/srv', sqlite('/var/lib/keygate/k.db')],
    ['./data/keygate.db', '/srv', sqlite('/srv/data/keygate.db')],
    ['keygate.db', '/srv/kg', sqlite('/srv/kg/keygate.db')],
    [':memory:', '/srv', sqlite(':memory:')],
  ])('%p from %p is SQLite at an absolute path', (value, cwd, expected) => {
    expect(parseDatabaseUrl(value, cwd)).toEqual(expected);
  });

  it.each([
    ['postgres://keygate:hunter2@db:5432/keygate', 'postgres://keygate:***@db:5432/keygate'],
    ['postgresql://db/keygate', 'postgresql://db/keygate'],
    ['POSTGRES://u:p@db/k', 'postgres://u:***@db/k'],
    ['postgres://u@db/k?sslmode=require&password=hunter2', 'postgres://u@db/k?sslmode=require&password=***'],
  ])('%p is PostgreSQL, shown as %p', (url, redacted) => {
    expect(parseDatabaseUrl(url)).toEqual({ engine: 'postgres', url, redacted });
  });

  it.each([
    ['mysql://root:hunter2@db/keygate', 'mysql'],
    ['pg://keygate:hunter2@db/keygate', 'pg'],
    ['http://db.example.com/keygate', 'http'],
    ['sqlite:///var/lib/keygate/k.db', 'sqlite'],
    ['redis+tls://x', 'redis+tls'],
  ])('refuses %p in one line that names only the scheme', (value, scheme) => {
    const refusal = () => loadConfig({ DATABASE_URL: value });
    expect(refusal).toThrow(
      new ConfigError(
        `DATABASE_URL must be a SQLite file path, :memory:, or a postgres:// or postgresql:// URL (got a ${scheme}:// URL).`,
      ),
    );
  });

  it.each(['sqlite:keygate.db', 'file:keygate.db'])(
    'refuses %p with a hint to write the path itself',
    (value) => {
      expect(() => loadConfig({ DATABASE_URL: value })).toThrow(
        `DATABASE_URL takes a SQLite database as a plain file path, without "${value.split(':')[0]}:" (e.g. /var/lib/keygate/keygate.db).`,
      );
    },
  );

  it('refuses a PostgreSQL URL it cannot parse, without repeating it', () => {
    const url = 'postgres://keygate:hunter#2@db/keygate';
    expect(() => loadConfig({ DATABASE_URL: url })).toThrow(/cannot be parsed/);
    try {
      loadConfig({ DATABASE_URL: url });
    } catch (error) {
      expect((error as Error).message).not.toContain('hunter');
    }
  });

  it('creates nothing when it refuses a scheme', () => {
    const cwd = mkdtempSync(join(scratch, 'scheme-'));
    expect(() => parseDatabaseUrl('mysql://x', cwd)).toThrow(ConfigError);
    expect(readdirSync(cwd)).toEqual([]);
  });
});

describe('resolveJwtSecret', () => {
  it('uses JWT_SECRET when set', () => {
    expect(resolveJwtSecret({ jwtSecret: 'x'.repeat(32), database: sqlite('/nonexistent/db') })).toBe(
      'x'.repeat(32),
    );
  });

  it('creates a random secret once beside the database, mode 0600, and reuses it', () => {
    const dir = mkdtempSync(join(scratch, 'secret-'));
    const config = { jwtSecret: undefined, database: sqlite(join(dir, 'sub', 'keygate.db')) };
    const first = resolveJwtSecret(config);
    expect(Buffer.byteLength(first)).toBeGreaterThanOrEqual(32);
    expect(resolveJwtSecret(config)).toBe(first);
    const file = join(dir, 'sub', 'jwt-secret');
    expect(readFileSync(file, 'utf8').trim()).toBe(first);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('requires JWT_SECRET with PostgreSQL: replicas share no directory to keep a generated one in', () => {
    const database = parseDatabaseUrl('postgres://keygate:hunter2@db/keygate');
    expect(() => resolveJwtSecret({ jwtSecret: undefined, database })).toThrow(
      /^With a PostgreSQL DATABASE_URL, set JWT_SECRET or JWT_SECRET_FILE/,
    );
    expect(resolveJwtSecret({ jwtSecret: 'x'.repeat(32), database })).toBe('x'.repeat(32));
  });

  it('refuses a secret file that is too short', () => {
    const dir = mkdtempSync(join(scratch, 'secret-'));
    writeFileSync(join(dir, 'jwt-secret'), 'short\n');
    expect(() => resolveJwtSecret({ jwtSecret: undefined, database: sqlite(join(dir, 'k.db')) })).toThrow(
      ConfigError,
    );
  });
});

describe('token key sources', () => {
  const jwks = 'https://idp.example.com/.well-known/jwks.json';
  let rsaPem = '';
  let ecPem = '';
  let privatePem = '';
  beforeAll(async () => {
    const rsa = await generateKeyPair('RS256', { extractable: true });
    const ec = await generateKeyPair('ES256', { extractable: true });
    rsaPem = await exportSPKI(rsa.publicKey);
    ecPem = await exportSPKI(ec.publicKey);
    privatePem = await exportPKCS8(rsa.privateKey);
  });

  it('defaults to the shared secret with HS256 only', () => {
    expect(loadConfig({})).toMatchObject({ jwtKeySource: 'secret', jwtAlgorithms: ['HS256'] });
  });

  it('takes a JWKS URL with the default algorithms, or JWT_ALGORITHMS', () => {
    expect(loadConfig({ JWT_JWKS_URL: jwks })).toMatchObject({
      jwtKeySource: 'jwks',
      jwtJwksUrl: jwks,
      jwtAlgorithms: ['RS256', 'ES256', 'EdDSA'],
    });
    expect(loadConfig({ JWT_JWKS_URL: jwks, JWT_ALGORITHMS: ' PS256 ,ES384,PS256' }).jwtAlgorithms).toEqual([
      'PS256',
      'ES384',
    ]);
  });

  it('keeps of JWT_ALGORITHMS what the PEM key can verify', () => {
    expect(loadConfig({ JWT_PUBLIC_KEY: rsaPem })).toMatchObject({
      jwtKeySource: 'public-key',
      jwtAlgorithms: ['RS256'],
    });
    expect(loadConfig({ JWT_PUBLIC_KEY: ecPem }).jwtAlgorithms).toEqual(['ES256']);
    expect(loadConfig({ JWT_PUBLIC_KEY: rsaPem, JWT_ALGORITHMS: 'RS512,PS256,ES256' }).jwtAlgorithms).toEqual(
      ['RS512', 'PS256'],
    );
  });

  it.each([
    [
      { JWT_SECRET: 'x'.repeat(32), JWT_JWKS_URL: jwks },
      'Set only one token key source; got JWT_SECRET and JWT_JWKS_URL.',
    ],
    [
      { JWT_JWKS_URL: jwks, JWT_PUBLIC_KEY: 'pem' },
      'Set only one token key source; got JWT_JWKS_URL and JWT_PUBLIC_KEY.',
    ],
    [{ JWT_JWKS_URL: jwks, JWT_ALGORITHMS: 'HS256' }, /^JWT_ALGORITHMS .*HMAC algorithm is never accepted/],
    [{ JWT_JWKS_URL: jwks, JWT_ALGORITHMS: 'RS256,none' }, /^JWT_ALGORITHMS .*"none" is never accepted/],
    [{ JWT_JWKS_URL: jwks, JWT_ALGORITHMS: 'PS512' }, /^JWT_ALGORITHMS .*"PS512" is not one of them/],
    [{ JWT_JWKS_URL: jwks, JWT_ALGORITHMS: 'RS256,' }, /^JWT_ALGORITHMS /],
    [{ JWT_ALGORITHMS: 'RS256' }, /^JWT_ALGORITHMS applies to JWT_JWKS_URL or JWT_PUBLIC_KEY/],
    [{ JWT_JWKS_URL: 'ftp://idp/jwks' }, /^JWT_JWKS_URL must be an http\(s\) URL/],
    [{ JWT_JWKS_URL: 'not a url' }, /^JWT_JWKS_URL must be an http\(s\) URL/],
    [{ JWT_PUBLIC_KEY: 'not a pem' }, /^JWT_PUBLIC_KEY is not a PEM public key/],
    [{ JWT_CLOCK_TOLERANCE_SECONDS: '301' }, /^JWT_CLOCK_TOLERANCE_SECONDS must be an integer from 0 to 300/],
    [{ JWT_CLOCK_TOLERANCE_SECONDS: '-1' }, /^JWT_CLOCK_TOLERANCE_SECONDS/],
  ])('refuses %p with one line', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('refuses a private key, and a key no allowed algorithm fits', () => {
    expect(() => loadConfig({ JWT_PUBLIC_KEY: privatePem })).toThrow('JWT_PUBLIC_KEY holds a private key');
    expect(() => loadConfig({ JWT_PUBLIC_KEY: ecPem, JWT_ALGORITHMS: 'RS256,EdDSA' })).toThrow(
      'JWT_PUBLIC_KEY can verify ES256, none of which JWT_ALGORITHMS (RS256,EdDSA) allows.',
    );
  });

  it('takes JWT_CLOCK_TOLERANCE_SECONDS from 0 to 300', () => {
    expect(loadConfig({}).jwtClockToleranceSeconds).toBe(0);
    expect(loadConfig({ JWT_CLOCK_TOLERANCE_SECONDS: '300' }).jwtClockToleranceSeconds).toBe(300);
  });
});

describe('*_FILE settings', () => {
  const file = (name: string, text: string) => {
    const path = join(mkdtempSync(join(scratch, 'file-')), name);
    writeFileSync(path, text);
    return path;
  };
  const secret = 's'.repeat(40);

  it('reads JWT_SECRET_FILE, DATABASE_URL_FILE and JWT_PUBLIC_KEY_FILE, trimming one trailing newline', () => {
    expect(loadConfig({ JWT_SECRET_FILE: file('secret', `${secret}\n`) }).jwtSecret).toBe(secret);
    expect(loadConfig({ JWT_SECRET_FILE: file('secret', `${secret}\r\n`) }).jwtSecret).toBe(secret);
    expect(loadConfig({ JWT_SECRET_FILE: file('secret', `${secret}\n\n`) }).jwtSecret).toBe(`${secret}\n`);
    expect(loadConfig({ JWT_SECRET_FILE: file('secret', `${secret} `) }).jwtSecret).toBe(`${secret} `);
    expect(loadConfig({ DATABASE_URL_FILE: file('db', '/var/lib/keygate/k.db\n') }).database).toEqual({
      engine: 'sqlite',
      path: '/var/lib/keygate/k.db',
    });
    expect(loadConfig({}, { JWT_SECRET_FILE: file('secret', secret) }).jwtSecret).toBe(secret);
  });

  it('reads a PEM from JWT_PUBLIC_KEY_FILE', async () => {
    const { publicKey } = await generateKeyPair('EdDSA', { extractable: true });
    const pem = await exportSPKI(publicKey);
    expect(loadConfig({ JWT_PUBLIC_KEY_FILE: file('key.pem', pem) })).toMatchObject({
      jwtKeySource: 'public-key',
      jwtPublicKey: pem.replace(/\n$/, ''),
      jwtAlgorithms: ['EdDSA'],
    });
  });

  it.each([
    [{ JWT_SECRET: secret, JWT_SECRET_FILE: '/x' }, 'Set JWT_SECRET or JWT_SECRET_FILE, not both.'],
    [
      { DATABASE_URL: ':memory:', DATABASE_URL_FILE: '/x' },
      'Set DATABASE_URL or DATABASE_URL_FILE, not both.',
    ],
    [
      { JWT_SECRET_FILE: '/nonexistent/keygate-secret' },
      'JWT_SECRET_FILE: cannot read /nonexistent/keygate-secret (ENOENT).',
    ],
    [{ DATABASE_URL_FILE: '/' }, 'DATABASE_URL_FILE: cannot read / (EISDIR).'],
  ])('refuses %p with one line', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('checks the secret read from a file like any other (at least 32 bytes)', () => {
    expect(() => loadConfig({ JWT_SECRET_FILE: file('short', 'short\n') })).toThrow(
      'JWT_SECRET must be at least 32 bytes (got 5).',
    );
  });

  it('counts a secret from a file as a key source', () => {
    expect(() =>
      loadConfig({ JWT_SECRET_FILE: file('secret', secret), JWT_JWKS_URL: 'https://idp.example/jwks' }),
    ).toThrow('Set only one token key source; got JWT_SECRET and JWT_JWKS_URL.');
  });
});
