// The commands keygate knows: each one's summary, usage, own flags, the settings it reads and examples
// (the help is made of them).
import type { SettingName } from '../config';

export type Command =
  | 'serve'
  | 'token'
  | 'console-link'
  | 'purge'
  | 'migrate'
  | 'backup'
  | 'healthcheck'
  | 'config';

export type CommandSpec = {
  summary: string;
  usage: string;
  /** The one word it takes besides flags, if any (backup's FILE). */
  argument?: string;
  /** The command's own flags (beside the settings), with their help and default. */
  options?: Record<string, { help: string; default?: string; boolean?: true }>;
  /** The settings it reads, in the order shown; unset: every setting (serve, config). */
  settings?: readonly SettingName[];
  examples: string[];
};

/** Where a one-shot command finds the database. */
const DATABASE_SETTINGS = ['DATABASE_URL', 'DATABASE_URL_FILE', 'DATABASE_POOL_SIZE'] as const;

export const COMMANDS: Record<Command, CommandSpec> = {
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
    usage:
      'keygate token --sub USER_ID [--level 0..8] [--scope SCOPES] [--ttl SECONDS] [--setting value ...]',
    options: {
      sub: {
        help: 'the user id the token speaks for (required); with JWT_USER_IDS=mapped, any subject',
      },
      level: { help: 'the level claim, 0..8 (default: none, which means 8)' },
      scope: {
        help: "the scope claim, space-separated; with JWT_ADMIN_SCOPE in it the token opens the operator's routes, and --sub may be any name",
      },
      ttl: { help: 'seconds until it expires, 1..315360000', default: '3600' },
    },
    // The secret, or the server's secret file beside DATABASE_URL; the claims the server checks.
    settings: [
      'JWT_SECRET',
      'JWT_SECRET_FILE',
      'DATABASE_URL',
      'DATABASE_URL_FILE',
      'JWT_USER_IDS',
      'JWT_ISSUER',
      'JWT_AUDIENCE',
      'MAX_EXPIRES_IN_SECONDS',
    ],
    examples: [
      'keygate token --sub 42',
      'keygate token --sub 42 --level 3 --ttl 600 --database-url /var/lib/keygate/keygate.db',
      "JWT_USER_IDS=mapped keygate token --sub 'auth0|5f1b2c'",
      'keygate token --scope keygate:admin --sub ops',
    ],
  },
  'console-link': {
    summary: 'print a one-time link to the web console, for a user or for the operator',
    usage:
      'keygate console-link --user USER_ID | --operator [--session-seconds 60..86400] [--setting value ...]',
    options: {
      user: { help: "keygate's user id whose console the link opens, at level 8" },
      operator: { help: "the operator's console instead (every user's keys)", boolean: true },
      'session-seconds': {
        help: 'how long the session lasts once opened',
        default: 'CONSOLE_SESSION_SECONDS',
      },
    },
    // The database the server uses, and what makes the link: where the console is and whether it is on.
    settings: [...DATABASE_SETTINGS, 'CONSOLE', 'CONSOLE_SESSION_SECONDS', 'PUBLIC_URL', 'BASE_PATH'],
    examples: [
      'keygate console-link --operator --database-url /var/lib/keygate/keygate.db',
      'keygate console-link --user 42 --session-seconds 900',
      'PUBLIC_URL=https://keys.example.com keygate console-link --operator',
    ],
  },
  purge: {
    summary: 'delete expired keys once and print how many',
    usage: 'keygate purge [--database-url PATH]',
    settings: DATABASE_SETTINGS,
    examples: ['keygate purge --database-url /var/lib/keygate/keygate.db'],
  },
  migrate: {
    summary: 'create the database or apply its migrations, and exit',
    usage: 'keygate migrate [--database-url PATH]',
    settings: DATABASE_SETTINGS,
    examples: ['keygate migrate --database-url /var/lib/keygate/keygate.db'],
  },
  backup: {
    summary: 'copy the SQLite database (and its generated JWT secret) to new files, even while it serves',
    usage: 'keygate backup FILE [--database-url PATH]',
    argument: 'FILE',
    // The secret settings say whether there is a generated secret file to copy.
    settings: ['DATABASE_URL', 'DATABASE_URL_FILE', 'JWT_SECRET', 'JWT_SECRET_FILE'],
    examples: [
      'keygate backup /var/backups/keygate-$(date +%F).db --database-url /var/lib/keygate/keygate.db',
    ],
  },
  healthcheck: {
    summary: "exit 0 when GET /health answers 200 (for Docker's HEALTHCHECK)",
    usage: 'keygate healthcheck [--port N] [--host H] [--base-path P]',
    settings: ['HOST', 'PORT', 'BASE_PATH'],
    examples: ['keygate healthcheck', 'keygate healthcheck --port 8080'],
  },
  config: {
    summary: 'print the effective settings, secrets masked, and where each comes from',
    usage: 'keygate config [--setting value ...]',
    examples: ['keygate config', 'PORT=8080 keygate config --log-level debug'],
  },
};
export const COMMAND_NAMES = Object.keys(COMMANDS) as Command[];
