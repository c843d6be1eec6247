// Configuration: environment variables, each overridable by a `--kebab-case` flag, checked into a
// frozen, typed Config. Each bad value is one ConfigError line (all of them reported together); the
// CLI turns it into exit code 2.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { isAbsolute, resolve } from 'node:path';
import { SECRET_PREFIX_PATTERN } from './apikeys/secrets';
import {
  type AsymmetricAlgorithm,
  algorithmsForPublicKey,
  DEFAULT_ASYMMETRIC_ALGORITHMS,
  type JwtAlgorithm,
  parseAlgorithms,
} from './auth/jwt-keys';
import { USER_ID_MODES, type UserIdMode } from './auth/subjects';
import { LOG_LEVELS, type LogLevel } from './core/log';
import { RATE_LIMIT_BOUNDS, type RateLimitRule } from './limits/rate-limit';
import { type AddressList, parseTrustedProxies, trustedProxiesProblem } from './network/blocks';
import { type PermissionQuery, parsePermissionQuery } from './permissions/query';
import { parseRouteRules, type RouteRule, RouteRulesError } from './verification/route-rules';
import { parseLeadTimes } from './webhooks/lead-times';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * DATABASE_URL, read once: the engine and where its data lives. A SQLite path is made absolute against
 * the working directory at start, so every message and log line names the file actually opened.
 */
export type DatabaseChoice =
  | Readonly<{
      engine: 'sqlite';
      /** Absolute, or `:memory:`. */
      path: string;
    }>
  | Readonly<{
      engine: 'postgres';
      url: string;
      /** The URL without its password, for messages and log lines. */
      redacted: string;
    }>;

export type Config = Readonly<{
  port: number;
  host: string;
  database: DatabaseChoice;
  /** PostgreSQL only: connections in this replica's pool. */
  databasePoolSize: number;
  /** Unset: a random secret is created once in the data directory (see jwt-secret.ts). */
  jwtSecret: string | undefined;
  /** Where token keys come from: the HS256 secret, an identity provider's JWKS, or one PEM key. */
  jwtKeySource: 'secret' | 'jwks' | 'public-key';
  jwtJwksUrl: string | undefined;
  jwtPublicKey: string | undefined;
  /** The algorithms accepted: HS256 with the secret, else JWT_ALGORITHMS (those the PEM key fits). */
  jwtAlgorithms: readonly JwtAlgorithm[];
  jwtClockToleranceSeconds: number;
  jwtIssuer: string | undefined;
  jwtAudience: string | undefined;
  /** How a token's `sub` becomes a user id: it is one (`numeric`), or is given one (`mapped`). */
  jwtUserIds: UserIdMode;
  /** The scope a token's `scope` claim must contain for the operator's routes (/admin). */
  jwtAdminScope: string;
  basePath: string;
  purgeIntervalSeconds: number;
  maxExpiresInSeconds: number;
  maxKeysPerUser: number;
  /** How long a key's row stays in memory; also bounds staleness when a change event is lost. */
  keyCacheSeconds: number;
  logLevel: LogLevel;
  /** Unset: no metrics listener (and nothing is counted). */
  metricsPort: number | undefined;
  metricsHost: string;
  idleTimeoutSeconds: number;
  shutdownTimeoutSeconds: number;
  /** Seconds between writes of the usage counts (and so the most lastUsedAt lags behind). */
  usageFlushSeconds: number;
  /** Days usage rows are kept; older ones are removed by the purge timer. */
  usageRetentionDays: number;
  /** The operator's rate limit on every key's verifications, beside the key's own; unset: none. */
  rateLimit: RateLimitRule | undefined;
  /** TRUSTED_PROXIES as given: a comma list of addresses and CIDR blocks, '' for none. */
  trustedProxies: string;
  /** The peers whose X-Forwarded-For is believed (nginx's real_ip_recursive); none by default. */
  trustedProxyList: AddressList;
  /** FORWARD_AUTH_RULES_FILE and its rules as read at start (SIGHUP reads it again); undefined: none. */
  forwardAuthRules: { path: string; rules: readonly ForwardAuthRule[] } | undefined;
  /** What forward-auth does with a request no rule matches: any valid credential, or deny (NO_RULE). */
  forwardAuthDefault: 'credential' | 'deny';
  /** What every new secret starts with; secrets of earlier prefixes keep working. */
  secretPrefix: string;
  /** POST /leaks/github is served (GitHub's secret scanning alerts); off: it is an unknown path. */
  githubSecretScanning: boolean;
  /** Where GitHub publishes the keys that sign its alerts. */
  githubSecretScanningKeysUrl: string;
  /** What a leaked secret's key gets. */
  leakAction: LeakAction;
  /** The console: off, every console path (and the session routes) answers 404. */
  console: boolean;
  /** How long a console session lasts unless its link asked otherwise. */
  consoleSessionSeconds: number;
  /** The origin browsers reach keygate at (no path): links become absolute, Origin is checked against it. */
  publicUrl: string | undefined;
  /** The console's CSP frame-ancestors: who may frame it. */
  consoleFrameAncestors: string;
  /** The console's title, shown in its pages. */
  consoleTitle: string;
  /** The console's accent colour (a CSS colour). */
  consoleAccent: string;
  /** Webhooks may go to http URLs and private, loopback or link-local addresses (tests, private networks). */
  webhookAllowPrivate: boolean;
  /** The lead times of key.expiring, in ms, largest first. */
  webhookExpiringLeadMs: readonly number[];
  /** Days settled webhook messages are kept; older ones are removed by the purge timer. */
  webhookRetentionDays: number;
}>;

export const LEAK_ACTIONS = ['disable', 'delete', 'notify'] as const;
export type LeakAction = (typeof LEAK_ACTIONS)[number];

/** A forward-auth route rule, its permissions query parsed. */
export type ForwardAuthRule = RouteRule<PermissionQuery>;

/** A setting's default (undefined: unset), what it is for, and what that default means when not plain. */
export type SettingSpec = Readonly<{ default: string | undefined; help: string; defaultMeans?: string }>;

/** Every setting: its environment variable, its default, and what a bad value is told. */
export const SETTINGS = {
  PORT: { default: '3000', help: 'TCP port to listen on (0 picks a free one)' },
  HOST: { default: '0.0.0.0', help: 'address to listen on' },
  DATABASE_URL: {
    default: './data/keygate.db',
    help: 'a SQLite file path (relative to the working directory), :memory:, or postgres://user:password@host:port/database',
  },
  DATABASE_URL_FILE: {
    default: undefined,
    help: 'a file holding DATABASE_URL (one trailing newline trimmed)',
  },
  DATABASE_POOL_SIZE: { default: '10', help: 'PostgreSQL connections per replica' },
  JWT_SECRET: {
    default: undefined,
    help: 'HS256 secret, at least 32 bytes',
    defaultMeans: 'generated once into jwt-secret beside the SQLite database; required with PostgreSQL',
  },
  JWT_SECRET_FILE: { default: undefined, help: 'a file holding JWT_SECRET (one trailing newline trimmed)' },
  JWT_JWKS_URL: {
    default: undefined,
    help: "an identity provider's JWKS endpoint, http(s) (instead of JWT_SECRET)",
  },
  JWT_PUBLIC_KEY: { default: undefined, help: 'a PEM public key that signs tokens (instead of JWT_SECRET)' },
  JWT_PUBLIC_KEY_FILE: { default: undefined, help: 'a file holding JWT_PUBLIC_KEY' },
  JWT_ALGORITHMS: {
    default: undefined,
    help: 'with a JWKS or PEM key: the algorithms allowed, a comma list',
    defaultMeans: `${DEFAULT_ASYMMETRIC_ALGORITHMS.join(',')}; with a PEM key, those of them it fits`,
  },
  JWT_CLOCK_TOLERANCE_SECONDS: {
    default: '0',
    help: 'seconds of clock skew allowed on exp, nbf and iat (0 to 300)',
  },
  JWT_ISSUER: { default: undefined, help: 'when set, tokens must carry this iss', defaultMeans: 'any iss' },
  JWT_AUDIENCE: { default: undefined, help: 'when set, tokens must carry this aud', defaultMeans: 'any aud' },
  JWT_USER_IDS: {
    default: 'numeric',
    help: 'numeric: sub is the user id; mapped: each (iss, sub) is given a user id of keygate’s own',
  },
  JWT_ADMIN_SCOPE: {
    default: 'keygate:admin',
    help: "the scope a token's scope claim must contain for the operator's routes (/admin)",
  },
  BASE_PATH: { default: '', help: 'prefix for every path, e.g. /auth' },
  PURGE_INTERVAL_SECONDS: { default: '60', help: 'seconds between purges of expired keys' },
  MAX_EXPIRES_IN_SECONDS: {
    default: '315360000',
    help: 'largest expiresIn accepted, in seconds',
    defaultMeans: 'ten years',
  },
  MAX_KEYS_PER_USER: { default: '1000', help: 'live keys one user may hold' },
  KEY_CACHE_SECONDS: {
    default: '10',
    help: 'seconds a key is kept in memory (0 to 3600; 0 turns the cache off)',
  },
  LOG_LEVEL: { default: 'info', help: `one of ${LOG_LEVELS.join(', ')}` },
  METRICS_PORT: {
    default: undefined,
    help: 'port of the Prometheus /metrics listener',
    defaultMeans: 'no listener, nothing counted',
  },
  METRICS_HOST: { default: '127.0.0.1', help: 'address of the /metrics listener' },
  IDLE_TIMEOUT_SECONDS: {
    default: '75',
    help: 'seconds an idle keep-alive connection stays open (1-255; keep it above the proxy’s)',
  },
  SHUTDOWN_TIMEOUT_SECONDS: {
    default: '8',
    help: 'seconds SIGTERM waits for requests in flight before closing their connections',
  },
  USAGE_FLUSH_SECONDS: {
    default: '10',
    help: 'seconds between writes of usage counts and last use (1 to 300; a crash loses at most this much)',
  },
  USAGE_RETENTION_DAYS: { default: '90', help: 'days usage history is kept (1 to 3650)' },
  RATE_LIMIT: {
    default: undefined,
    help: 'every key: at most <limit> verifications per <duration> seconds, e.g. 1000/60',
    defaultMeans: 'none (only the keys’ own limits)',
  },
  TRUSTED_PROXIES: {
    default: undefined,
    help: 'proxies whose X-Forwarded-For is believed: a comma list of addresses and CIDR blocks',
    defaultMeans: 'none: the client is the TCP peer',
  },
  FORWARD_AUTH_RULES_FILE: {
    default: undefined,
    help: 'a JSON file of forward-auth route rules (SIGHUP reloads it)',
    defaultMeans: 'no rules',
  },
  FORWARD_AUTH_DEFAULT: {
    default: 'credential',
    help: 'forward-auth for a request no rule matches: credential (any valid one) or deny',
  },
  SECRET_PREFIX: {
    default: 'kgs_',
    help: 'what new secrets start with: 2 to 16 characters of a-z 0-9 _, ending in _ (register it with secret scanners)',
  },
  GITHUB_SECRET_SCANNING: {
    default: 'off',
    help: "on: serve POST /leaks/github for GitHub's secret scanning alerts",
  },
  GITHUB_SECRET_SCANNING_KEYS_URL: {
    default: 'https://api.github.com/meta/public_keys/secret_scanning',
    help: 'where the keys that sign those alerts are published, http(s)',
  },
  LEAK_ACTION: {
    default: 'disable',
    help: "what a leaked secret's key gets: disable, delete or notify (the event and audit line only)",
  },
  CONSOLE: { default: 'on', help: 'the web console and its session routes: on or off (off: every path 404)' },
  CONSOLE_SESSION_SECONDS: {
    default: '3600',
    help: 'seconds a console session lasts when its link does not say (60 to 86400)',
  },
  PUBLIC_URL: {
    default: undefined,
    help: 'the origin browsers reach keygate at, e.g. https://keys.example.com: console links become absolute and console changes must come from it',
    defaultMeans: 'links are paths; changes must come from the request’s own Host',
  },
  CONSOLE_FRAME_ANCESTORS: {
    default: "'none'",
    help: "who may frame the console: a CSP frame-ancestors source list, e.g. 'self' https://app.example.com",
  },
  CONSOLE_TITLE: { default: 'keygate', help: 'the console’s title, shown on its pages (1 to 80 characters)' },
  CONSOLE_ACCENT: {
    default: '#2563eb',
    help: 'the console’s accent colour: a CSS colour (#hex, rgb(), hsl() or a name)',
  },
  WEBHOOK_ALLOW_PRIVATE: {
    default: 'false',
    help: 'true lets webhooks go to http URLs and loopback, private or link-local addresses',
  },
  WEBHOOK_EXPIRING_LEAD: {
    default: '7d,1d',
    help: 'when key.expiring is sent before a key expires: a comma list of <n>s|m|h|d',
  },
  WEBHOOK_RETENTION_DAYS: { default: '7', help: 'days delivered webhook messages are kept (1 to 3650)' },
} as const satisfies Record<string, SettingSpec>;

export type SettingName = keyof typeof SETTINGS;

/** `DATABASE_URL` ⇄ `--database-url`. */
export function flagOf(name: SettingName): string {
  return `--${name.toLowerCase().replaceAll('_', '-')}`;
}

export function settingOfFlag(flag: string): SettingName | undefined {
  return (Object.keys(SETTINGS) as SettingName[]).find((name) => flagOf(name) === flag);
}

const TEN_THOUSAND_YEARS_S = 10_000 * 365 * 24 * 3600;

/**
 * The Config, or a ConfigError with one line per bad setting, all of them at once: each setting that
 * is set is checked on its own too, so a typo in PORT does not hide one in LOG_LEVEL.
 */
export function loadConfig(
  env: Record<string, string | undefined>,
  flags: Partial<Record<SettingName, string>> = {},
): Config {
  try {
    return buildConfig(env, flags);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    // Each setting checked beside those that are fine on their own, so that a rule between two
    // settings (METRICS_PORT against PORT) is judged with the values actually given.
    const given = (Object.keys(SETTINGS) as SettingName[]).flatMap((name) => {
      const value = flags[name] ?? env[name];
      return value === undefined || value === '' ? [] : [[name, value] as const];
    });
    const problemOf = (values: Record<string, string>): string | undefined => {
      try {
        buildConfig(values);
        return undefined;
      } catch (problem) {
        if (problem instanceof ConfigError) return problem.message;
        throw problem;
      }
    };
    const fine = Object.fromEntries(given.filter(([name, value]) => !problemOf({ [name]: value })));
    const problems = new Set<string>();
    for (const [name, value] of given) {
      if (name in fine) continue;
      const problem = problemOf({ ...fine, [name]: value });
      if (problem !== undefined) problems.add(problem);
    }
    problems.add(error.message); // a rule between settings shows up only when they are together
    throw new ConfigError([...problems].join('\n'));
  }
}

function buildConfig(
  env: Record<string, string | undefined>,
  flags: Partial<Record<SettingName, string>> = {},
): Config {
  // A flag wins over the environment; an empty value counts as unset.
  const given = (name: SettingName): string | undefined => {
    const value = flags[name] ?? env[name];
    return value === undefined || value === '' ? undefined : value;
  };
  const raw = (name: SettingName): string | undefined => given(name) ?? SETTINGS[name].default;
  /** A setting that may also come from a file named by `<NAME>_FILE`, but not from both. */
  const rawOrFile = (name: SettingName, fileSetting: SettingName): string | undefined => {
    const path = given(fileSetting);
    if (path === undefined) return raw(name);
    if (given(name) !== undefined) throw new ConfigError(`Set ${name} or ${fileSetting}, not both.`);
    return fileContents(fileSetting, path);
  };
  const jwtSecret = rawOrFile('JWT_SECRET', 'JWT_SECRET_FILE');
  if (jwtSecret !== undefined && Buffer.byteLength(jwtSecret) < 32) {
    throw new ConfigError(`JWT_SECRET must be at least 32 bytes (got ${Buffer.byteLength(jwtSecret)}).`);
  }
  const jwtJwksUrl = raw('JWT_JWKS_URL');
  const jwtPublicKey = rawOrFile('JWT_PUBLIC_KEY', 'JWT_PUBLIC_KEY_FILE');
  const sources = [
    jwtSecret !== undefined && 'JWT_SECRET',
    jwtJwksUrl !== undefined && 'JWT_JWKS_URL',
    jwtPublicKey !== undefined && 'JWT_PUBLIC_KEY',
  ].filter((name) => name !== false);
  if (sources.length > 1) {
    throw new ConfigError(`Set only one token key source; got ${sources.join(' and ')}.`);
  }
  return Object.freeze({
    port: integer('PORT', raw('PORT'), 0, 65535),
    host: listenHost(raw('HOST')),
    database: parseDatabaseUrl(nonEmpty('DATABASE_URL', rawOrFile('DATABASE_URL', 'DATABASE_URL_FILE'))),
    databasePoolSize: integer('DATABASE_POOL_SIZE', raw('DATABASE_POOL_SIZE'), 1, 1000),
    jwtSecret,
    jwtKeySource: jwtJwksUrl !== undefined ? 'jwks' : jwtPublicKey !== undefined ? 'public-key' : 'secret',
    jwtJwksUrl: jwtJwksUrl === undefined ? undefined : jwksUrl(jwtJwksUrl),
    jwtPublicKey,
    jwtAlgorithms: jwtAlgorithms(raw('JWT_ALGORITHMS'), jwtJwksUrl, jwtPublicKey),
    jwtClockToleranceSeconds: integer(
      'JWT_CLOCK_TOLERANCE_SECONDS',
      raw('JWT_CLOCK_TOLERANCE_SECONDS'),
      0,
      300,
    ),
    jwtIssuer: raw('JWT_ISSUER'),
    jwtAudience: raw('JWT_AUDIENCE'),
    jwtUserIds: userIdMode(raw('JWT_USER_IDS') ?? 'numeric'),
    jwtAdminScope: scopeToken(raw('JWT_ADMIN_SCOPE') ?? 'keygate:admin'),
    basePath: basePath(raw('BASE_PATH') ?? ''),
    purgeIntervalSeconds: integer('PURGE_INTERVAL_SECONDS', raw('PURGE_INTERVAL_SECONDS'), 1, 86_400),
    maxExpiresInSeconds: integer(
      'MAX_EXPIRES_IN_SECONDS',
      raw('MAX_EXPIRES_IN_SECONDS'),
      1,
      TEN_THOUSAND_YEARS_S,
    ),
    maxKeysPerUser: integer('MAX_KEYS_PER_USER', raw('MAX_KEYS_PER_USER'), 1, 1_000_000_000),
    keyCacheSeconds: integer('KEY_CACHE_SECONDS', raw('KEY_CACHE_SECONDS'), 0, 3600),
    logLevel: logLevel(raw('LOG_LEVEL') ?? 'info'),
    ...metricsListener(raw('METRICS_PORT'), raw('METRICS_HOST'), raw('PORT')),
    // Bun's idleTimeout takes at most 255 seconds.
    idleTimeoutSeconds: integer('IDLE_TIMEOUT_SECONDS', raw('IDLE_TIMEOUT_SECONDS'), 1, 255),
    shutdownTimeoutSeconds: integer('SHUTDOWN_TIMEOUT_SECONDS', raw('SHUTDOWN_TIMEOUT_SECONDS'), 0, 3600),
    usageFlushSeconds: integer('USAGE_FLUSH_SECONDS', raw('USAGE_FLUSH_SECONDS'), 1, 300),
    usageRetentionDays: integer('USAGE_RETENTION_DAYS', raw('USAGE_RETENTION_DAYS'), 1, 3650),
    rateLimit: rateLimit(raw('RATE_LIMIT')),
    trustedProxies: raw('TRUSTED_PROXIES') ?? '',
    trustedProxyList: trustedProxies(raw('TRUSTED_PROXIES') ?? ''),
    forwardAuthRules: forwardAuthRules(raw('FORWARD_AUTH_RULES_FILE')),
    forwardAuthDefault: forwardAuthDefault(raw('FORWARD_AUTH_DEFAULT') ?? 'credential'),
    secretPrefix: secretPrefix(raw('SECRET_PREFIX') ?? 'kgs_'),
    githubSecretScanning: onOrOff('GITHUB_SECRET_SCANNING', raw('GITHUB_SECRET_SCANNING') ?? 'off'),
    githubSecretScanningKeysUrl: httpUrl(
      'GITHUB_SECRET_SCANNING_KEYS_URL',
      raw('GITHUB_SECRET_SCANNING_KEYS_URL') ?? '',
    ),
    leakAction: leakAction(raw('LEAK_ACTION') ?? 'disable'),
    console: onOff('CONSOLE', raw('CONSOLE') ?? 'on'),
    consoleSessionSeconds: integer('CONSOLE_SESSION_SECONDS', raw('CONSOLE_SESSION_SECONDS'), 60, 86_400),
    publicUrl: publicUrl(raw('PUBLIC_URL')),
    consoleFrameAncestors: frameAncestors(raw('CONSOLE_FRAME_ANCESTORS') ?? "'none'"),
    consoleTitle: consoleTitle(raw('CONSOLE_TITLE') ?? 'keygate'),
    consoleAccent: cssColour(raw('CONSOLE_ACCENT') ?? '#2563eb'),
    webhookAllowPrivate: booleanSetting('WEBHOOK_ALLOW_PRIVATE', raw('WEBHOOK_ALLOW_PRIVATE') ?? 'false'),
    webhookExpiringLeadMs: leadTimes(raw('WEBHOOK_EXPIRING_LEAD') ?? '7d,1d'),
    webhookRetentionDays: integer('WEBHOOK_RETENTION_DAYS', raw('WEBHOOK_RETENTION_DAYS'), 1, 3650),
  });
}

function onOff(name: SettingName, value: string): boolean {
  if (value !== 'on' && value !== 'off')
    throw new ConfigError(`${name} must be on or off (got "${value.slice(0, 40)}").`);
  return value === 'on';
}

/** An http(s) origin: scheme, host and port, no path, query or fragment (a trailing / is dropped). */
function publicUrl(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (
    url === undefined ||
    (url.protocol !== 'https:' && url.protocol !== 'http:') ||
    url.pathname !== '/' ||
    url.search !== '' ||
    url.hash !== '' ||
    url.username !== '' ||
    url.password !== '' ||
    /[?#]/.test(value)
  ) {
    throw new ConfigError(
      `PUBLIC_URL must be an http(s) origin without a path, e.g. https://keys.example.com (got "${value.slice(0, 200)}").`,
    );
  }
  return url.origin;
}

/** One CSP source expression of frame-ancestors (CSP3): 'none' (alone), 'self', a scheme or a host source. */
const FRAME_SOURCE =
  /^(?:'self'|[a-z][a-z0-9+.-]*:|(?:[a-z][a-z0-9+.-]*:\/\/)?(?:\*|(?:\*\.)?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)(?::(?:[0-9]{1,5}|\*))?(?:\/[A-Za-z0-9._~!$&'()*+=:@%/-]*)?)$/;

function frameAncestors(value: string): string {
  const sources = value.trim().split(/[ \t]+/);
  const fine =
    value.trim() === "'none'" ||
    (sources.length <= 32 && sources.every((source) => FRAME_SOURCE.test(source)));
  if (!fine) {
    throw new ConfigError(
      `CONSOLE_FRAME_ANCESTORS must be 'none' or a space-separated list of CSP sources such as 'self' https://app.example.com (got "${value.slice(0, 200)}").`,
    );
  }
  return sources.join(' ');
}

function consoleTitle(value: string): string {
  const characters = [...value];
  if (characters.length > 80 || value.trim() === '' || /[\p{Cc}]/u.test(value)) {
    throw new ConfigError(
      `CONSOLE_TITLE must be 1 to 80 characters without control characters (got "${value.slice(0, 40)}").`,
    );
  }
  return value;
}

/**
 * A CSS colour: #rgb, #rgba, #rrggbb, #rrggbbaa, a colour function of numbers (rgb(), hsl(), oklch()…)
 * or a name. Nothing that could close the declaration it is put in (no ; { } < > quotes or backslash).
 */
const CSS_COLOUR =
  /^(?:#(?:[0-9a-fA-F]{3,4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})|[a-zA-Z]{3,30}|(?:rgba?|hsla?|hwb|lab|lch|oklab|oklch)\([0-9a-z.,%\s/+-]{1,80}\))$/;

function cssColour(value: string): string {
  if (!CSS_COLOUR.test(value.trim())) {
    throw new ConfigError(
      `CONSOLE_ACCENT must be a CSS colour such as #2563eb, rgb(37 99 235) or teal (got "${value.slice(0, 40)}").`,
    );
  }
  return value.trim();
}

function trustedProxies(value: string): AddressList {
  const problem = trustedProxiesProblem(value);
  if (problem !== undefined) throw new ConfigError(`TRUSTED_PROXIES: ${problem}`);
  return parseTrustedProxies(value);
}

/** The rules file read and checked now: a bad file stops start-up, naming the rule. */
function forwardAuthRules(path: string | undefined): Config['forwardAuthRules'] {
  if (path === undefined) return undefined;
  return {
    path,
    rules: readRouteRules(path, (problem) => new ConfigError(`FORWARD_AUTH_RULES_FILE: ${problem}`)),
  };
}

/** Reads and checks a rules file (at start, and on SIGHUP); `refused` words its problem. */
export function readRouteRules(path: string, refused: (problem: string) => Error): ForwardAuthRule[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw refused(
      `cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}).`,
    );
  }
  try {
    return parseRouteRules(text, parsePermissionQuery);
  } catch (error) {
    if (error instanceof RouteRulesError) throw refused(`${path}: ${error.message}`);
    throw error;
  }
}

function secretPrefix(value: string): string {
  if (!SECRET_PREFIX_PATTERN.test(value)) {
    throw new ConfigError(
      `SECRET_PREFIX must be 2 to 16 characters of a-z, 0-9 and _, ending in _ (got "${value.slice(0, 40)}").`,
    );
  }
  return value;
}

function onOrOff(name: SettingName, value: string): boolean {
  if (value !== 'on' && value !== 'off')
    throw new ConfigError(`${name} must be on or off (got "${value.slice(0, 40)}").`);
  return value === 'on';
}

function leakAction(value: string): LeakAction {
  const action = LEAK_ACTIONS.find((candidate) => candidate === value);
  if (!action) {
    throw new ConfigError(`LEAK_ACTION must be disable, delete or notify (got "${value.slice(0, 40)}").`);
  }
  return action;
}

function booleanSetting(name: SettingName, value: string): boolean {
  if (value !== 'true' && value !== 'false')
    throw new ConfigError(`${name} must be true or false (got "${value}").`);
  return value === 'true';
}

function leadTimes(value: string): number[] {
  try {
    return parseLeadTimes(value);
  } catch (error) {
    throw new ConfigError(
      `WEBHOOK_EXPIRING_LEAD must be a comma list of <n>s, <n>m, <n>h or <n>d, e.g. 7d,1d: ${(error as Error).message} (got "${value.slice(0, 60)}").`,
    );
  }
}

function forwardAuthDefault(value: string): 'credential' | 'deny' {
  if (value !== 'credential' && value !== 'deny') {
    throw new ConfigError(`FORWARD_AUTH_DEFAULT must be credential or deny (got "${value}").`);
  }
  return value;
}

function metricsListener(port: string | undefined, host: string | undefined, apiPort: string | undefined) {
  const metricsPort = port === undefined ? undefined : integer('METRICS_PORT', port, 0, 65535);
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === Number(apiPort)) {
    throw new ConfigError(`METRICS_PORT must differ from PORT (both are ${metricsPort}).`);
  }
  return { metricsPort, metricsHost: nonEmpty('METRICS_HOST', host) };
}

/** `<limit>/<duration>`, each within a key's own ratelimit bounds. */
function rateLimit(value: string | undefined): RateLimitRule | undefined {
  if (value === undefined) return undefined;
  const { limit, duration } = RATE_LIMIT_BOUNDS;
  const rule = `<limit>/<duration>: limit ${limit.min} to ${limit.max} verifications per duration ${duration.min} to ${duration.max} seconds, e.g. 1000/60`;
  const parts = /^([0-9]+)\/([0-9]+)$/.exec(value);
  const parsed = parts && { limit: Number(parts[1]), duration: Number(parts[2]) };
  if (
    parsed === null ||
    parsed.limit < limit.min ||
    parsed.limit > limit.max ||
    parsed.duration < duration.min ||
    parsed.duration > duration.max
  ) {
    throw new ConfigError(`RATE_LIMIT must be ${rule} (got "${value}").`);
  }
  return parsed;
}

function integer(name: SettingName, value: string | undefined, min: number, max: number): number {
  const parsed = value !== undefined && /^[0-9]+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(parsed) || parsed < min || parsed > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max} (got "${value}").`);
  }
  return parsed;
}

/** The file's text with one trailing newline (LF or CRLF) trimmed; unreadable is one line. */
function fileContents(name: SettingName, path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new ConfigError(`${name}: cannot read ${path} (${code}).`);
  }
  return text.replace(/\r?\n$/, '');
}

const URL_SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//;

/**
 * `postgres://` or `postgresql://` is PostgreSQL; a path or `:memory:` is SQLite. Any other `scheme://`
 * (mysql://, pg://, http://) is refused rather than taken for a directory named after the scheme, and
 * so are `sqlite:` and `file:` prefixes, which would otherwise name a file called `sqlite:…`. A
 * refusal names only the scheme: the rest of a URL may hold a password.
 */
export function parseDatabaseUrl(value: string, workingDirectory = process.cwd()): DatabaseChoice {
  const scheme = URL_SCHEME.exec(value)?.[1]?.toLowerCase();
  if (scheme === 'postgres' || scheme === 'postgresql') {
    return Object.freeze({ engine: 'postgres', url: value, redacted: withoutPassword(value) });
  }
  if (scheme !== undefined) {
    throw new ConfigError(
      `DATABASE_URL must be a SQLite file path, :memory:, or a postgres:// or postgresql:// URL (got a ${scheme}:// URL).`,
    );
  }
  const prefix = /^(sqlite|file):/i.exec(value)?.[1];
  if (prefix !== undefined) {
    throw new ConfigError(
      `DATABASE_URL takes a SQLite database as a plain file path, without "${prefix}:" (e.g. /var/lib/keygate/keygate.db).`,
    );
  }
  if (value === ':memory:') return Object.freeze({ engine: 'sqlite', path: value });
  return Object.freeze({
    engine: 'sqlite',
    path: isAbsolute(value) ? resolve(value) : resolve(workingDirectory, value),
  });
}

/** The SQLite database's file; undefined for `:memory:` and for PostgreSQL, which keep no file here. */
export function sqliteFile(database: DatabaseChoice): string | undefined {
  return database.engine === 'sqlite' && database.path !== ':memory:' ? database.path : undefined;
}

/** The URL with its password (in the authority or a `password` parameter) replaced by `***`. */
function withoutPassword(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(
      'DATABASE_URL is a PostgreSQL URL that cannot be parsed (percent-encode any @, :, / or # in the user name or password).',
    );
  }
  if (url.password !== '') url.password = '***';
  for (const name of [...url.searchParams.keys()]) {
    if (/password/i.test(name)) url.searchParams.set(name, '***');
  }
  return url.href;
}

function jwksUrl(value: string): string {
  return httpUrl('JWT_JWKS_URL', value);
}

function httpUrl(name: SettingName, value: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
    throw new ConfigError(`${name} must be an http(s) URL (got "${value.slice(0, 200)}").`);
  }
  return url.href;
}

function jwtAlgorithms(
  value: string | undefined,
  jwksUrl: string | undefined,
  publicKey: string | undefined,
): readonly JwtAlgorithm[] {
  if (jwksUrl === undefined && publicKey === undefined) {
    if (value !== undefined) {
      throw new ConfigError(
        'JWT_ALGORITHMS applies to JWT_JWKS_URL or JWT_PUBLIC_KEY; with a shared secret the algorithm is HS256.',
      );
    }
    return Object.freeze(['HS256'] as const);
  }
  const wanted: readonly AsymmetricAlgorithm[] =
    value === undefined ? DEFAULT_ASYMMETRIC_ALGORITHMS : orThrow(parseAlgorithms(value));
  return Object.freeze(
    publicKey === undefined ? [...wanted] : orThrow(algorithmsForPublicKey(publicKey, wanted)),
  );
}

function orThrow<T>(outcome: T | { problem: string }): T {
  if (typeof outcome === 'object' && outcome !== null && 'problem' in outcome) {
    throw new ConfigError(outcome.problem);
  }
  return outcome as T;
}

function nonEmpty(name: SettingName, value: string | undefined): string {
  if (value === undefined || value.trim() === '') throw new ConfigError(`${name} must not be empty.`);
  return value;
}

/** An IP address or a host name; a dotted number that is no IPv4 address (999.1.1.1) is neither. */
function listenHost(value: string | undefined): string {
  const host = nonEmpty('HOST', value);
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const looksNumeric = /^[0-9.]+$/.test(bare) || bare.includes(':');
  if ((looksNumeric && isIP(bare) === 0) || !/^[A-Za-z0-9.:[\]_-]+$/.test(host)) {
    throw new ConfigError(`HOST must be an IP address or a host name to listen on (got "${host}").`);
  }
  return host;
}

function basePath(value: string): string {
  const trimmed = value.endsWith('/') ? value.slice(0, -1) : value;
  if (trimmed !== '' && !/^(\/[A-Za-z0-9._~-]+)+$/.test(trimmed)) {
    throw new ConfigError(
      `BASE_PATH must look like /segment or /a/b, made of letters, digits and ._~- (got "${value}").`,
    );
  }
  // `.` and `..` segments pass the character check, but URLs normalise them away: every route would
  // then be 404 while the start-up line shows a normalised URL. Refused instead.
  if (trimmed.split('/').some((segment) => segment === '.' || segment === '..')) {
    throw new ConfigError(`BASE_PATH must not contain "." or ".." segments (got "${value}").`);
  }
  return trimmed;
}

function userIdMode(value: string): UserIdMode {
  const mode = USER_ID_MODES.find((candidate) => candidate === value);
  if (!mode) throw new ConfigError(`JWT_USER_IDS must be numeric or mapped (got "${value.slice(0, 40)}").`);
  return mode;
}

function logLevel(value: string): LogLevel {
  const level = LOG_LEVELS.find((candidate) => candidate === value.toLowerCase());
  if (!level) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${value}").`);
  return level;
}

/** One OAuth scope token: printable ASCII but the space, the double quote and the backslash. */
function scopeToken(value: string): string {
  if (!/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(value)) {
    throw new ConfigError(
      `JWT_ADMIN_SCOPE must be one scope: printable ASCII without spaces, quotes or backslashes (got "${value.slice(0, 40)}").`,
    );
  }
  return value;
}
