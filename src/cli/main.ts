// argv → serve | token | console-link | purge | migrate | backup | healthcheck | config: the only place that exits.

import { ConfigError, loadConfig } from '../config';
import { systemClock } from '../core/clock';
import { purgeExpiredKeys } from '../jobs/purge';
import { purgeWithEvents } from '../keygate';
import { backup } from './backup';
import { consoleLink } from './console-link';
import { existingDatabase, openForCommand } from './database';
import { EXIT_USAGE, StartupError, UsageError } from './errors';
import { healthcheck } from './healthcheck';
import { commandHelp, globalHelp, versionLine } from './help';
import { parseCommandLine } from './parse';
import { runServer } from './run-server';
import { effectiveSettings } from './show-config';
import { mintToken } from './token';
import { unknownSettingWarnings } from './unknown-settings';

/** Runs the command argv names and exits with its code; a known failure is one line per message, exit 2. */
export function main(argv: string[]): void {
  run(argv).then(
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
}

async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandLine(argv);
  if ('help' in parsed) return print(parsed.help ? commandHelp(parsed.help) : globalHelp());
  if ('version' in parsed) return print(versionLine());
  const config = loadConfig(process.env, parsed.settings);
  switch (parsed.command) {
    case 'serve':
      return runServer(config, { warnings: unknownSettingWarnings(process.env) });
    case 'token':
      return print(await mintToken(config, parsed.options));
    case 'console-link':
      existingDatabase(config, 'console-link');
      return print(await consoleLink(config, parsed.options));
    case 'purge': {
      existingDatabase(config, 'purge');
      const opened = await openForCommand(config);
      const removed = await purgeExpiredKeys(await purgeWithEvents(opened, systemClock), systemClock);
      await opened.webhooks.close();
      await opened.store.close();
      return print(`purged ${removed} expired keys`);
    }
    case 'migrate': {
      const { store, database, appliedMigrations } = await openForCommand(config);
      const applied = await appliedMigrations();
      await store.close();
      return print(`database ${database} is at migration ${applied}`);
    }
    case 'backup':
      return print(backup(config, parsed.argument as string));
    case 'healthcheck':
      return healthcheck(config);
    case 'config':
      for (const warning of unknownSettingWarnings(process.env))
        process.stderr.write(`keygate: ${warning}\n`);
      return print(effectiveSettings(config, parsed.settings));
  }
}

function print(line: string): number {
  process.stdout.write(`${line}\n`);
  return 0;
}
