#!/usr/bin/env bun
// The one entry point: argv → serve | token | purge | migrate | healthcheck. The only place that exits.
import { createJwtAuthority } from './auth/jwt';
import { resolveJwtSecret } from './auth/jwt-secret';
import { systemClock } from './clock';
import {
  type Config,
  ConfigError,
  flagOf,
  loadConfig,
  SETTINGS,
  type SettingName,
  settingOfFlag,
} from './config';
import { redactedUrl } from './db/postgres/open';
import { purgeExpiredKeys } from './jobs/purge';
import { openStore } from './keygate';
import { createLogger } from './log';
import { type RunningServer, serve } from './serve';
import { VERSION } from './version';

const COMMANDS = ['serve', 'token', 'purge', 'migrate', 'healthcheck'] as const;
type Command = (typeof COMMANDS)[number];
const TOKEN_FLAGS = ['--sub', '--level', '--ttl'] as const;

const EXIT_USAGE = 2;

class UsageError extends Error {}

type Parsed = {
  command: Command;
  settings: Partial<Record<SettingName, string>>;
  options: Record<string, string>;
};

function parseArgs(argv: string[]): Parsed | 'help' | 'version' {
  let command: Command | undefined;
  const settings: Partial<Record<SettingName, string>> = {};
  const options: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--help' || arg === '-h' || arg === 'help') return 'help';
    if (arg === '--version' || arg === '-v') return 'version';
    if (!arg.startsWith('--')) {
      if (command !== undefined || !COMMANDS.includes(arg as Command)) {
        throw new UsageError(`unknown command "${arg}"; see keygate --help.`);
      }
      command = arg as Command;
      continue;
    }
    const equals = arg.indexOf('=');
    const flag = equals === -1 ? arg : arg.slice(0, equals);
    let value = equals === -1 ? argv[i + 1] : arg.slice(equals + 1);
    if (value === undefined) throw new UsageError(`${flag} needs a value.`);
    if (equals === -1) i++;
    const setting = settingOfFlag(flag);
    if (setting) settings[setting] = value;
    else if ((TOKEN_FLAGS as readonly string[]).includes(flag)) options[flag] = value;
    else throw new UsageError(`unknown flag ${flag}; see keygate --help.`);
    value = undefined;
  }
  command ??= 'serve';
  if (command !== 'token' && Object.keys(options).length > 0) {
    throw new UsageError(`${Object.keys(options)[0]} belongs to "keygate token".`);
  }
  return { command, settings, options };
}

const HELP = `keygate ${VERSION}: create and delete API keys over HTTP.

Usage: keygate [command] [flags]

Commands:
  serve         serve the API (the default)
  token         print a JWT signed with keygate's secret: --sub USER_ID [--level 0..8] [--ttl SECONDS]
  purge         delete expired keys once and print how many
  migrate       apply database migrations and exit
  healthcheck   exit 0 when GET /health answers 200 (for Docker's HEALTHCHECK)

Settings (environment variable, or the flag beside it):
${(Object.keys(SETTINGS) as SettingName[])
  .map((name) => `  ${name.padEnd(29)}${flagOf(name).padEnd(33)}${SETTINGS[name].help}`)
  .join('\n')}

  --help, --version`;

async function run(argv: string[]): Promise<number> {
  const parsed = parseArgs(argv);
  if (parsed === 'help') return print(HELP);
  if (parsed === 'version') return print(VERSION);
  const config = loadConfig(process.env, parsed.settings);
  switch (parsed.command) {
    case 'serve':
      return runServer(config);
    case 'token':
      return print(await mintToken(config, parsed.options));
    case 'purge': {
      const { store } = await openStore(config, { listen: false });
      const removed = await purgeExpiredKeys(store, systemClock);
      await store.close();
      return print(`purged ${removed} expired keys`);
    }
    case 'migrate': {
      const { store, database, appliedMigrations } = await openStore(config, { listen: false });
      const applied = await appliedMigrations();
      await store.close();
      return print(`database ${database} is at migration ${applied}`);
    }
    case 'healthcheck':
      return healthcheck(config);
  }
}

function print(line: string): number {
  process.stdout.write(`${line}\n`);
  return 0;
}

async function mintToken(config: Config, options: Record<string, string>): Promise<string> {
  if (config.jwtKeySource !== 'secret') {
    const setting = config.jwtKeySource === 'jwks' ? 'JWT_JWKS_URL' : 'JWT_PUBLIC_KEY';
    throw new UsageError(
      `keygate token signs only HS256 tokens with JWT_SECRET; with ${setting} set, tokens come from your identity provider.`,
    );
  }
  const sub = wholeNumber('--sub', options['--sub'], 0, Number.MAX_SAFE_INTEGER);
  const level =
    options['--level'] === undefined ? undefined : wholeNumber('--level', options['--level'], 0, 8);
  // A token living longer than MAX_EXPIRES_IN_SECONDS would be refused by the server.
  const ttlSeconds = wholeNumber('--ttl', options['--ttl'] ?? '3600', 1, config.maxExpiresInSeconds);
  const jwt = createJwtAuthority({
    secret: resolveJwtSecret(config),
    issuer: config.jwtIssuer,
    audience: config.jwtAudience,
    clock: systemClock,
  });
  return jwt.sign({ sub, level, ttlSeconds });
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
    throw new StartupError(
      `cannot start with database ${redactedUrl(config.databaseUrl)} on ${config.host}:${config.port}: ${(error as Error).message}`,
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

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const known =
      error instanceof UsageError || error instanceof ConfigError || error instanceof StartupError;
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`keygate: ${known ? message : `cannot run: ${message}`}\n`);
    process.exit(EXIT_USAGE);
  },
);
