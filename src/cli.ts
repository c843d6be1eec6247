#!/usr/bin/env bun
// The one entry point: argv → serve | token | purge | migrate | healthcheck | config. The only place
// that exits. Flags are read by node:util's parseArgs, strictly, per command.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createJwtAuthority } from './auth/jwt';
import { dataDirectory, JWT_SECRET_FILE, resolveJwtSecret } from './auth/jwt-secret';
import { isMappableSubject, MAX_SUBJECT_LENGTH } from './auth/token-users';
import {
  type Config,
  ConfigError,
  flagOf,
  loadConfig,
  SETTINGS,
  type SettingName,
  settingOfFlag,
} from './config';
import { systemClock } from './core/clock';
import { createLogger } from './core/log';
import { isPostgresUrl, redactedUrl } from './db/postgres/open';
import { purgeExpiredKeys } from './jobs/purge';
import { openStore } from './keygate';
import { type RunningServer, serve } from './serve';
import { COMMIT, VERSION } from './version';

type Command = 'serve' | 'token' | 'purge' | 'migrate' | 'healthcheck' | 'config';

type CommandSpec = {
  summary: string;
  usage: string;
  /** The command's own flags (beside the settings), with their help and default. */
  options?: Record<string, { help: string; default?: string }>;
  examples: string[];
};

const COMMANDS: Record<Command, CommandSpec> = {
  serve: {
    summary: 'serve the API (the default command)',
    usage: 'keygate [serve] [--setting value ...]',
    examples: [
      'keygate',
      'keygate serve --port 8080 --database-url /var/lib/keygate/keygate.db',
      'METRICS_PORT=9464 keygate serve',
    ],
  },
  token: {
    summary: "print a JWT signed with the server's secret",
    usage: 'keygate token --sub USER_ID [--level 0..8] [--ttl SECONDS] [--setting value ...]',
    options: {
      sub: {
        help: 'the user id the token speaks for (required); with JWT_USER_IDS=mapped, any subject',
      },
      level: { help: 'the level claim, 0..8 (default: none, which means 8)' },
      ttl: { help: 'seconds until it expires, 1..315360000', default: '3600' },
    },
    examples: [
      'keygate token --sub 42',
      'keygate token --sub 42 --level 3 --ttl 600 --database-url /var/lib/keygate/keygate.db',
      "JWT_USER_IDS=mapped keygate token --sub 'auth0|5f1b2c'",
    ],
  },
  purge: {
    summary: 'delete expired keys once and print how many',
    usage: 'keygate purge [--database-url PATH]',
    examples: ['keygate purge --database-url /var/lib/keygate/keygate.db'],
  },
  migrate: {
    summary: 'create the database or apply its migrations, and exit',
    usage: 'keygate migrate [--database-url PATH]',
    examples: ['keygate migrate --database-url /var/lib/keygate/keygate.db'],
  },
  healthcheck: {
    summary: "exit 0 when GET /health answers 200 (for Docker's HEALTHCHECK)",
    usage: 'keygate healthcheck [--port N] [--host H] [--base-path P]',
    examples: ['keygate healthcheck', 'keygate healthcheck --port 8080'],
  },
  config: {
    summary: 'print the effective settings, secrets masked, and where each comes from',
    usage: 'keygate config [--setting value ...]',
    examples: ['keygate config', 'PORT=8080 keygate config --log-level debug'],
  },
};
const COMMAND_NAMES = Object.keys(COMMANDS) as Command[];

const EXIT_USAGE = 2;

class UsageError extends Error {}

type Parsed =
  | { command: Command; settings: Partial<Record<SettingName, string>>; options: Record<string, string> }
  | { help: Command | undefined }
  | { version: true };

function parseCommandLine(argv: string[]): Parsed {
  const first = argv[0];
  if (first === 'help') return { help: commandNamed(argv[1]) };
  const named = first !== undefined && !first.startsWith('-');
  const command = named ? commandNamed(first) : 'serve';
  if (command === undefined) {
    throw new UsageError(
      `unknown command "${first}"; the commands are ${COMMAND_NAMES.join(', ')} (see keygate --help).`,
    );
  }
  const spec = COMMANDS[command];
  const settingOptions = Object.fromEntries(
    (Object.keys(SETTINGS) as SettingName[]).map((name) => [
      flagOf(name).slice(2),
      { type: 'string' as const },
    ]),
  );
  const commandOptions = Object.fromEntries(
    Object.keys(spec.options ?? {}).map((name) => [name, { type: 'string' as const }]),
  );
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: named ? argv.slice(1) : argv,
      options: {
        ...settingOptions,
        ...commandOptions,
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
      strict: true,
      allowPositionals: true,
    }));
  } catch (error) {
    throw new UsageError(describeParseError(error, command));
  }
  if (values.help) return { help: named ? command : undefined };
  if (values.version) return { version: true };
  if (positionals.length > 0) {
    const extra = positionals[0] as string;
    throw new UsageError(
      COMMAND_NAMES.includes(extra as Command)
        ? `one command at a time: "${extra}" after "keygate ${command}" is not a flag (see keygate ${command} --help).`
        : `keygate ${command} takes no arguments, only flags; got "${extra}" (see keygate ${command} --help).`,
    );
  }
  const settings: Partial<Record<SettingName, string>> = {};
  const options: Record<string, string> = {};
  for (const [name, value] of Object.entries(values)) {
    if (typeof value !== 'string') continue;
    const setting = settingOfFlag(`--${name}`);
    if (setting) settings[setting] = value;
    else options[name] = value;
  }
  return { command, settings, options };
}

function commandNamed(name: string | undefined): Command | undefined {
  return COMMAND_NAMES.find((command) => command === name);
}

/** node:util's messages, in keygate's words and naming the flag. */
function describeParseError(error: unknown, command: Command): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: string }).code;
  const flag = /'(-[^' ]+)/.exec(message)?.[1] ?? 'a flag';
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    return `unknown flag ${flag} for keygate ${command} (see keygate ${command} --help).`;
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    return `${flag} needs a value, as in ${flag} VALUE or ${flag}=VALUE.`;
  }
  return `${message.split('\n')[0]} (see keygate ${command} --help).`;
}

function settingsHelp(): string {
  return (Object.keys(SETTINGS) as SettingName[])
    .map((name) => {
      const fallback = SETTINGS[name].default;
      const shown = fallback === undefined ? 'unset' : fallback === '' ? 'empty' : fallback;
      return `  ${name.padEnd(24)}${flagOf(name).padEnd(26)}${SETTINGS[name].help} (default: ${shown})`;
    })
    .join('\n');
}

function globalHelp(): string {
  return `keygate ${VERSION}: create and delete API keys over HTTP.

Usage: keygate [command] [flags]

Commands:
${COMMAND_NAMES.map((name) => `  ${name.padEnd(13)}${COMMANDS[name].summary}`).join('\n')}

Settings (environment variable, or the flag beside it; a flag wins):
${settingsHelp()}

  keygate COMMAND --help   a command's flags, defaults and examples
  keygate --version        version, commit and Bun version`;
}

function commandHelp(command: Command): string {
  const spec = COMMANDS[command];
  const options = Object.entries(spec.options ?? {}).map(
    ([name, option]) =>
      `  --${name.padEnd(22)}${option.help}${option.default === undefined ? '' : ` (default: ${option.default})`}`,
  );
  return `keygate ${command}: ${spec.summary}

Usage: ${spec.usage}
${options.length > 0 ? `\nFlags:\n${options.join('\n')}\n` : ''}
Settings (environment variable, or the flag beside it; a flag wins):
${settingsHelp()}

Examples:
${spec.examples.map((example) => `  ${example}`).join('\n')}`;
}

async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandLine(argv);
  if ('help' in parsed) return print(parsed.help ? commandHelp(parsed.help) : globalHelp());
  if ('version' in parsed) return print(versionLine());
  const config = loadConfig(process.env, parsed.settings);
  switch (parsed.command) {
    case 'serve':
      return runServer(config);
    case 'token':
      return print(await mintToken(config, parsed.options));
    case 'purge': {
      existingDatabase(config, 'purge');
      const { store } = await openStore(config, { serving: false });
      const removed = await purgeExpiredKeys(store, systemClock);
      await store.close();
      return print(`purged ${removed} expired keys`);
    }
    case 'migrate': {
      const { store, database, appliedMigrations } = await openStore(config, { serving: false });
      const applied = await appliedMigrations();
      await store.close();
      return print(`database ${database} is at migration ${applied}`);
    }
    case 'healthcheck':
      return healthcheck(config);
    case 'config':
      return print(effectiveSettings(config, parsed.settings));
  }
}

function print(line: string): number {
  process.stdout.write(`${line}\n`);
  return 0;
}

function versionLine(): string {
  return `keygate ${VERSION} (commit ${COMMIT}, bun ${Bun.version})`;
}

/** Only `serve` and `migrate` may create a SQLite file: elsewhere a mistyped path is an error. */
function existingDatabase(config: Config, command: Command): string {
  const file = config.databaseUrl !== ':memory:' && !isPostgresUrl(config.databaseUrl);
  if (file && !existsSync(config.databaseUrl)) {
    throw new UsageError(
      `the database ${config.databaseUrl} does not exist; keygate ${command} uses an existing one ` +
        '(keygate serve or keygate migrate creates it). Check DATABASE_URL or --database-url.',
    );
  }
  return config.databaseUrl;
}

/** `keygate config`: every setting's effective value and its source; secrets are never printed. */
function effectiveSettings(config: Config, flags: Partial<Record<SettingName, string>>): string {
  const rows = (Object.keys(SETTINGS) as SettingName[]).map((name) => {
    const source = flags[name] !== undefined ? 'flag' : process.env[name] ? 'environment' : 'default';
    const key = name.toLowerCase().replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());
    const value = (config as Record<string, unknown>)[key];
    return { setting: `${name}=${shownValue(name, value, config)}`, source };
  });
  const width = Math.max(...rows.map((row) => row.setting.length));
  return rows.map((row) => `${row.setting.padEnd(width)}  (${row.source})`).join('\n');
}

function shownValue(name: SettingName, value: unknown, config: Config): string {
  if (name === 'JWT_SECRET') {
    const file = join(dataDirectory(config.databaseUrl), JWT_SECRET_FILE);
    if (typeof value === 'string') return `<set, ${Buffer.byteLength(value)} bytes, not shown>`;
    return `<unset: the server uses ${file}${existsSync(file) ? '' : ', not created yet'}>`;
  }
  if (/SECRET|PASSWORD|TOKEN/.test(name) && value !== undefined) return '<set, not shown>';
  if (value === undefined) return '';
  // A database URL may carry a password (postgres://user:password@host/db).
  return String(value).replace(/(\/\/[^:/@]+:)[^@]*@/, '$1***@');
}

async function mintToken(config: Config, options: Record<string, string>): Promise<string> {
  if (config.jwtKeySource !== 'secret') {
    const setting = config.jwtKeySource === 'jwks' ? 'JWT_JWKS_URL' : 'JWT_PUBLIC_KEY';
    throw new UsageError(
      `keygate token signs only HS256 tokens with JWT_SECRET; with ${setting} set, tokens come from your identity provider.`,
    );
  }
  const sub =
    config.jwtUserIds === 'mapped'
      ? mappableSubject(options.sub)
      : wholeNumber('--sub', options.sub, 0, Number.MAX_SAFE_INTEGER);
  const level = options.level === undefined ? undefined : wholeNumber('--level', options.level, 0, 8);
  // A token living longer than MAX_EXPIRES_IN_SECONDS would be refused by the server.
  const ttlSeconds = wholeNumber('--ttl', options.ttl ?? '3600', 1, config.maxExpiresInSeconds);
  refuseToInventSecret(config);
  const jwt = createJwtAuthority({
    secret: resolveJwtSecret(config),
    issuer: config.jwtIssuer,
    audience: config.jwtAudience,
    clock: systemClock,
  });
  return jwt.sign({ sub, level, ttlSeconds });
}

/**
 * A token signed with a secret the server does not have is refused by it: without JWT_SECRET, use the
 * file the server created beside its database, and never create one here.
 */
function refuseToInventSecret(config: Config): void {
  if (config.jwtSecret !== undefined) return;
  const file = join(dataDirectory(config.databaseUrl), JWT_SECRET_FILE);
  if (existsSync(file)) return;
  throw new UsageError(
    `no JWT secret to sign with: JWT_SECRET is unset and ${file} does not exist. The server keeps its ` +
      'secret there, beside its database, once it has started; give keygate token the same ' +
      'DATABASE_URL (or --database-url) as the server, or the same JWT_SECRET.',
  );
}

/** The token only names its subject: the server gives it a user id on first use. */
function mappableSubject(value: string | undefined): string {
  if (value === undefined) throw new UsageError('--sub is required.');
  if (!isMappableSubject(value)) {
    throw new UsageError(
      `--sub must be 1 to ${MAX_SUBJECT_LENGTH} characters, without NUL, with JWT_USER_IDS=mapped.`,
    );
  }
  return value;
}

function wholeNumber(flag: string, value: string | undefined, min: number, max: number): number {
  if (value === undefined) throw new UsageError(`${flag} is required.`);
  const parsed = /^[0-9]+$/.test(value) ? Number(value) : Number.NaN;
  if (!(parsed >= min && parsed <= max))
    throw new UsageError(`${flag} must be an integer from ${min} to ${max}.`);
  return parsed;
}

async function healthcheck(config: Config): Promise<number> {
  const host = ['0.0.0.0', '::', '[::]'].includes(config.host) ? '127.0.0.1' : config.host;
  const url = `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${config.port}${config.basePath}/health`;
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(3000) });
    if (response.ok) return 0;
    process.stderr.write(`keygate: ${url} answered ${response.status}\n`);
  } catch (error) {
    process.stderr.write(`keygate: ${url} did not answer: ${(error as Error).message}\n`);
  }
  return 1;
}

async function runServer(config: Config): Promise<number> {
  const logger = createLogger(config.logLevel);
  let server: RunningServer;
  try {
    // With an identity provider's keys no secret is read or created.
    const jwtSecret = config.jwtKeySource === 'secret' ? resolveJwtSecret(config) : undefined;
    server = await serve(config, { jwtSecret, logger });
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    const { code, syscall } = error as { code?: string; syscall?: string };
    const listening = syscall === 'listen' ? LISTEN_FAILURES[code ?? ''] : undefined;
    throw new StartupError(
      listening
        ? `cannot listen on ${config.host}:${config.port}: ${listening(config)}`
        : `cannot start with database ${redactedUrl(config.databaseUrl)} on ${config.host}:${config.port}: ${(error as Error).message}`,
    );
  }
  return new Promise((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) {
        // A second signal while draining: stop waiting.
        logger.warn('forced exit', { signal });
        logger.flush();
        process.exit(1);
      }
      stopping = true;
      logger.info('stopping', { signal });
      server.stop().then(
        () => resolve(0),
        (error: unknown) => {
          logger.error('stop failed', { error: String(error) });
          logger.flush();
          resolve(1);
        },
      );
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
}

class StartupError extends Error {}

// Bun's own message for these is the same for all ("Is port 0 in use?"); the code says which.
const LISTEN_FAILURES: Record<string, (config: Config) => string> = {
  EADDRINUSE: (config) => `port ${config.port} is already in use there (another keygate?).`,
  EADDRNOTAVAIL: (config) =>
    `${config.host} is not an address of this machine, so nothing can listen on it (HOST; 0.0.0.0 means every address).`,
  EINVAL: (config) =>
    `${config.host} is not an address keygate can listen on (HOST must be an IP address of this machine or a name for one).`,
  EACCES: (config) => `port ${config.port} needs privileges this process lacks (use a port above 1023).`,
};

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const known =
      error instanceof UsageError || error instanceof ConfigError || error instanceof StartupError;
    const message = error instanceof Error ? error.message : String(error);
    const lines = (known ? message : `cannot run: ${message}`).split('\n');
    process.stderr.write(lines.map((line) => `keygate: ${line}\n`).join(''));
    process.exit(EXIT_USAGE);
  },
);
