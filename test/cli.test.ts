// The command line (src/cli.ts, run from source): per-command help with defaults and examples, unknown
// flags and stray words named as such, every bad setting at once, listen failures said plainly,
// `token` that never invents a secret, `purge` that never creates a database, and `config`.
import { afterAll, describe, expect, it } from 'bun:test';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pkg from '../package.json' with { type: 'json' };
import { flagOf, SETTINGS, type SettingName } from '../src/config';

const CLI = join(import.meta.dir, '..', 'src', 'cli.ts');
const scratch = mkdtempSync(join(tmpdir(), 'keygate-cli-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const SECRET = 'cli-test-secret-that-is-at-least-32-bytes';

function keygate(args: string[], env: Record<string, string> = {}) {
  const cwd = mkdtempSync(join(scratch, 'run-'));
  const result = Bun.spawnSync([process.execPath, CLI, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
    timeout: 10_000, // a server that starts by mistake would run forever
  });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString(), cwd };
}

describe('usage mistakes (exit 2, named plainly)', () => {
  it.each([
    [
      ['token', '--sub', '42', '--foo'],
      'keygate: unknown flag --foo for keygate token (see keygate token --help).\n',
    ],
    [
      ['serve', 'serve'],
      'keygate: one command at a time: "serve" after "keygate serve" is not a flag (see keygate serve --help).\n',
    ],
    [
      ['purge', 'now'],
      'keygate: keygate purge takes no arguments, only flags; got "now" (see keygate purge --help).\n',
    ],
    [
      ['frobnicate'],
      'keygate: unknown command "frobnicate"; the commands are serve, token, console-link, purge, migrate, backup, healthcheck, config (see keygate --help).\n',
    ],
    [['token', '--sub'], 'keygate: --sub needs a value, as in --sub VALUE or --sub=VALUE.\n'],
    [['token', '--sub', '--level', '3'], 'keygate: --sub needs a value, as in --sub VALUE or --sub=VALUE.\n'],
    [['serve', '--sub', '1'], 'keygate: unknown flag --sub for keygate serve (see keygate serve --help).\n'],
  ])('keygate %p', (args, stderr) => {
    const result = keygate(args, { JWT_SECRET: SECRET });
    expect(result.stderr).toBe(stderr);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
  });
});

describe('help and version', () => {
  it('keygate token --help shows its own flags, defaults and examples, not the global help', () => {
    const result = keygate(['token', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toStartWith("keygate token: print a JWT signed with the server's secret\n");
    expect(result.stdout).toContain('--ttl');
    expect(result.stdout).toContain('(default: 3600)');
    expect(result.stdout).toContain('Examples:\n  keygate token --sub 42\n');
    expect(result.stdout).not.toContain('Commands:');
  });

  it('keygate help purge and keygate purge -h say the same', () => {
    const viaHelp = keygate(['help', 'purge']).stdout;
    expect(viaHelp).toStartWith('keygate purge: ');
    expect(keygate(['purge', '-h']).stdout).toBe(viaHelp);
  });

  it('the global help lists every command and every setting with its default', () => {
    const { stdout, code } = keygate(['--help']);
    expect(code).toBe(0);
    for (const command of ['serve', 'token', 'purge', 'migrate', 'backup', 'healthcheck', 'config']) {
      expect(stdout).toContain(`\n  ${command} `);
    }
    expect(stdout).toContain('\n  PORT, --port  (default: 3000)\n      TCP port to listen on');
    expect(stdout).toContain('\n  LOG_LEVEL, --log-level  (default: info)\n');
    expect(stdout).toContain(
      '\n  METRICS_PORT, --metrics-port  (default: unset, no listener, nothing counted)\n',
    );
  });

  it('keeps each setting, its flag and its default apart, and says each default once', () => {
    const lines = keygate(['--help']).stdout.split('\n');
    for (const name of Object.keys(SETTINGS) as SettingName[]) {
      const line = lines.find((candidate) => candidate.startsWith(`  ${name}, `));
      expect(line).toStartWith(`  ${name}, ${flagOf(name)}  (default: `);
      const description = lines[lines.indexOf(line as string) + 1] as string;
      expect(description).toMatch(/^ {6}\S/);
      // Past the name and flag (FORWARD_AUTH_DEFAULT's flag has the word in it).
      const told = `${(line as string).slice(`  ${name}, ${flagOf(name)}`.length)} ${description}`;
      expect(told.match(/default/g)).toHaveLength(1);
    }
    for (const command of ['serve', 'token', 'purge']) {
      const help = keygate([command, '--help']).stdout;
      for (const line of help.split('\n')) {
        const told = line.replace(/^ {2}[A-Z_]+, --[a-z-]+/, '');
        expect(told.match(/default/g)?.length ?? 0).toBeLessThanOrEqual(1);
      }
    }
  });

  it.each([
    ['serve', Object.keys(SETTINGS)],
    ['config', Object.keys(SETTINGS)],
    [
      'token',
      [
        'JWT_SECRET',
        'JWT_SECRET_FILE',
        'DATABASE_URL',
        'DATABASE_URL_FILE',
        'JWT_USER_IDS',
        'JWT_ISSUER',
        'JWT_AUDIENCE',
        'MAX_EXPIRES_IN_SECONDS',
      ],
    ],
    ['purge', ['DATABASE_URL', 'DATABASE_URL_FILE', 'DATABASE_POOL_SIZE']],
    ['migrate', ['DATABASE_URL', 'DATABASE_URL_FILE', 'DATABASE_POOL_SIZE']],
    ['backup', ['DATABASE_URL', 'DATABASE_URL_FILE', 'JWT_SECRET', 'JWT_SECRET_FILE']],
    ['healthcheck', ['HOST', 'PORT', 'BASE_PATH']],
  ])('keygate %s --help lists only the settings it reads', (command, expected) => {
    const { stdout, code } = keygate([command, '--help']);
    expect(code).toBe(0);
    const listed = stdout.split('\n').flatMap((line) => /^ {2}([A-Z][A-Z0-9_]*), --/.exec(line)?.[1] ?? []);
    expect(listed).toEqual(expected);
    // Only a command that leaves settings out says so.
    expect(stdout.includes('the other settings do not apply here')).toBe(
      expected.length < Object.keys(SETTINGS).length,
    );
  });

  it('says what keygate is in one tagline: the help, package.json and the image label', () => {
    const tagline =
      'API keys for your backend: create, verify, limit and manage them over HTTP, one self-contained binary.';
    expect(pkg.description).toBe(tagline);
    expect(keygate(['--help']).stdout).toStartWith(`keygate ${pkg.version} — ${tagline}\n`);
    const dockerfile = readFileSync(join(import.meta.dir, '..', 'Dockerfile'), 'utf8');
    expect(dockerfile).toContain(`org.opencontainers.image.description="${tagline}"`);
  });

  it('--version names the version, the commit ("unknown" from source) and Bun', () => {
    expect(keygate(['--version']).stdout).toBe(
      `keygate ${pkg.version} (commit unknown, bun ${Bun.version})\n`,
    );
  });
});

describe('settings', () => {
  it('reports every bad setting at once, one line each', () => {
    const result = keygate(['serve', '--log-level', 'loud'], {
      PORT: 'abc',
      METRICS_PORT: 'x',
      HOST: '999.1.1.1',
    });
    expect(result.code).toBe(2);
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      'keygate: PORT must be an integer from 0 to 65535 (got "abc").',
      'keygate: HOST must be an IP address or a host name to listen on (got "999.1.1.1").',
      'keygate: LOG_LEVEL must be one of debug, info, warn, error, silent (got "loud").',
      'keygate: METRICS_PORT must be an integer from 0 to 65535 (got "x").',
    ]);
  });

  it.each(['mysql://root:hunter2@db/keygate', 'pg://keygate:hunter2@db/keygate', 'http://db.example.com/k'])(
    'refuses DATABASE_URL=%p in one line and creates nothing',
    (url) => {
      for (const command of ['serve', 'migrate', 'purge']) {
        const result = keygate([command], { DATABASE_URL: url, JWT_SECRET: SECRET, PORT: '0' });
        expect(result.code).toBe(2);
        expect(result.stderr).toStartWith('keygate: DATABASE_URL must be a SQLite file path');
        expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
        expect(result.stderr).not.toContain('hunter2');
        expect(readdirSync(result.cwd)).toEqual([]);
      }
    },
  );

  it('judges a rule between settings with the values given (METRICS_PORT beside PORT)', () => {
    const result = keygate(['config'], { PORT: '4000', METRICS_PORT: '3000', LOG_LEVEL: 'loud' });
    expect(result.stderr).toBe(
      'keygate: LOG_LEVEL must be one of debug, info, warn, error, silent (got "loud").\n',
    );
  });

  it('accepts LOG_LEVEL in any case', () => {
    const result = keygate(['config'], { LOG_LEVEL: 'INFO' });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('LOG_LEVEL=info ');
  });

  it('says plainly when HOST is not an address of this machine', () => {
    const result = keygate(['serve'], {
      HOST: '192.0.2.1',
      PORT: '0',
      DATABASE_URL: ':memory:',
      JWT_SECRET: SECRET,
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'keygate: cannot listen on 192.0.2.1:0: 192.0.2.1 is not an address of this machine, so nothing can listen on it (HOST; 0.0.0.0 means every address).\n',
    );
  });

  it('says plainly when the port is taken', () => {
    const taken = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
    try {
      const result = keygate(['serve'], {
        HOST: '127.0.0.1',
        PORT: String(taken.port),
        DATABASE_URL: ':memory:',
        JWT_SECRET: SECRET,
      });
      expect(result.code).toBe(2);
      expect(result.stderr).toBe(
        `keygate: cannot listen on 127.0.0.1:${taken.port}: port ${taken.port} is already in use there (another keygate?).\n`,
      );
    } finally {
      taken.stop(true);
    }
  });
  it('leaves no data directory, database or secret behind when the port is taken', () => {
    const taken = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
    try {
      // The default DATABASE_URL (./data/keygate.db) and no JWT_SECRET: a start would create both.
      const result = keygate(['serve'], { HOST: '127.0.0.1', PORT: String(taken.port) });
      expect(result.code).toBe(2);
      expect(result.stderr).toBe(
        `keygate: cannot listen on 127.0.0.1:${taken.port}: port ${taken.port} is already in use there (another keygate?).\n`,
      );
      expect(readdirSync(result.cwd)).toEqual([]);
    } finally {
      taken.stop(true);
    }
  });
});

describe('keygate token', () => {
  it('refuses to invent a secret, and says where the server keeps its own', () => {
    const result = keygate(['token', '--sub', '42', '--database-url', 'elsewhere/keygate.db']);
    expect(result.code).toBe(2);
    expect(result.stderr).toStartWith(
      `keygate: no JWT secret to sign with: JWT_SECRET is unset and ${join(result.cwd, 'elsewhere', 'jwt-secret')} does not exist.`,
    );
    expect(existsSync(join(result.cwd, 'elsewhere'))).toBe(false);
    expect(existsSync(join(result.cwd, 'data'))).toBe(false);
  });

  it('with PostgreSQL and no JWT_SECRET, says the secret is required and never shows the password', () => {
    const url = 'postgres://keygate:hunter2@127.0.0.1:1/keygate';
    const result = keygate(['token', '--sub', '42'], { DATABASE_URL: url });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'keygate: With a PostgreSQL DATABASE_URL, set JWT_SECRET or JWT_SECRET_FILE (or JWT_JWKS_URL, JWT_PUBLIC_KEY): every replica must verify tokens with the same key, so none is generated.\n',
    );
    expect(readdirSync(result.cwd)).toEqual([]);
  });

  it("signs with the server's secret file when it exists", () => {
    const dir = mkdtempSync(join(scratch, 'server-'));
    writeFileSync(join(dir, 'jwt-secret'), `${SECRET}\n`, { mode: 0o600 });
    const result = keygate(['token', '--sub', '42', '--database-url', join(dir, 'keygate.db')]);
    expect(result.code).toBe(0);
    const payload = JSON.parse(Buffer.from(result.stdout.split('.')[1] as string, 'base64url').toString());
    expect(payload.sub).toBe('42');
  });

  it('mints an operator token: --scope sets the scope claim, and --sub may be any name', () => {
    const result = keygate(['token', '--scope', 'keygate:admin', '--sub', 'ops'], { JWT_SECRET: SECRET });
    expect(result.code).toBe(0);
    const payload = JSON.parse(Buffer.from(result.stdout.split('.')[1] as string, 'base64url').toString());
    expect(payload).toMatchObject({ sub: 'ops', scope: 'keygate:admin' });
  });

  it.each([['keygate:admin  api'], [' keygate:admin'], ['a"b']])('refuses --scope %p', (scope) => {
    const result = keygate(['token', '--scope', scope, '--sub', 'ops'], { JWT_SECRET: SECRET });
    expect(result.code).toBe(2);
    expect(result.stderr).toStartWith('keygate: --scope must be');
  });
});

describe('commands that need an existing database', () => {
  it('purge refuses a database file that does not exist, and creates nothing', () => {
    const result = keygate(['purge', '--database-url', 'typo/keygate.db']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      `keygate: the database ${join(result.cwd, 'typo', 'keygate.db')} does not exist; keygate purge uses an existing one (keygate serve or keygate migrate creates it). Check DATABASE_URL or --database-url.\n`,
    );
    expect(existsSync(join(result.cwd, 'typo'))).toBe(false);
  });

  it('migrate creates it (that is its job)', () => {
    const result = keygate(['migrate', '--database-url', 'new/keygate.db']);
    expect(result.code).toBe(0);
    expect(existsSync(join(result.cwd, 'new', 'keygate.db'))).toBe(true);
  });
});

describe('keygate config', () => {
  it('prints every effective setting and its source, and never a secret', () => {
    const result = keygate(['config', '--port', '8080'], { JWT_SECRET: SECRET, LOG_LEVEL: 'warn' });
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines).toContainEqual(expect.stringMatching(/^PORT=8080 +\(flag\)$/));
    expect(lines).toContainEqual(expect.stringMatching(/^LOG_LEVEL=warn +\(environment\)$/));
    expect(lines).toContainEqual(expect.stringMatching(/^HOST=0\.0\.0\.0 +\(default\)$/));
    expect(lines).toContainEqual(
      expect.stringMatching(
        new RegExp(`^JWT_SECRET=<set, ${SECRET.length} bytes, not shown> +\\(environment\\)$`),
      ),
    );
    expect(result.stdout).not.toContain(SECRET);
    expect(lines).toHaveLength(Object.keys(SETTINGS).length);
  });

  it('with PostgreSQL, shows the URL without its password and says JWT_SECRET is required', () => {
    const result = keygate(['config'], { DATABASE_URL: 'postgresql://keygate:hunter2@db:5432/keygate' });
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines).toContainEqual(
      expect.stringMatching(/^DATABASE_URL=postgresql:\/\/keygate:\*\*\*@db:5432\/keygate +\(environment\)$/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^JWT_SECRET=<unset: required with PostgreSQL; set JWT_SECRET or JWT_SECRET_FILE> +\(default\)$/,
      ),
    );
    expect(result.stdout).not.toContain('hunter2');
  });

  it('credits a value read from a *_FILE setting to that setting, and shows the file, not its contents', () => {
    const dir = mkdtempSync(join(scratch, 'files-'));
    writeFileSync(join(dir, 'url'), 'postgres://keygate:hunter2@db/keygate\n');
    writeFileSync(join(dir, 'secret'), `${SECRET}\n`);
    const result = keygate(['config', '--jwt-secret-file', join(dir, 'secret')], {
      DATABASE_URL_FILE: join(dir, 'url'),
    });
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^DATABASE_URL=postgres:\/\/keygate:\*\*\*@db\/keygate +\(read from DATABASE_URL_FILE\)$/,
      ),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(new RegExp(`^DATABASE_URL_FILE=${join(dir, 'url')} +\\(environment\\)$`)),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^JWT_SECRET=<set, \d+ bytes, not shown> +\(read from JWT_SECRET_FILE\)$/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(new RegExp(`^JWT_SECRET_FILE=${join(dir, 'secret')} +\\(flag\\)$`)),
    );
    expect(result.stdout).not.toContain('hunter2');
    expect(result.stdout).not.toContain(SECRET);
  });

  it('shows a SQLite path made absolute', () => {
    const result = keygate(['config', '--database-url', 'here/keygate.db']);
    expect(result.stdout).toContain(`DATABASE_URL=${join(result.cwd, 'here', 'keygate.db')} `);
  });

  it('says where the generated secret lives when JWT_SECRET is unset', () => {
    const result = keygate(['config', '--database-url', '/var/lib/keygate/keygate.db']);
    expect(result.stdout).toContain(
      'JWT_SECRET=<unset: the server uses /var/lib/keygate/jwt-secret, not created yet>',
    );
  });
});
