// `keygate console-link --user N | --operator [--session-seconds S]`: a one-time console link made
// on the server's own database (so the server accepts it), for the first login on a new server or
// for support. Audit lines of what its session does name it `cli:console-link` (a user's) or
// `admin:console-link` (the operator's).
import type { Config } from '../config';
import { systemClock } from '../core/clock';
import { MAX_LEVEL } from '../core/levels';
import { consolePathOf } from '../keygate';
import { createSessionService, MAX_SESSION_SECONDS, MIN_SESSION_SECONDS } from '../sessions/service';
import { openForCommand } from './database';
import { UsageError } from './errors';
import { wholeNumber } from './token';

export async function consoleLink(config: Config, options: Record<string, string>): Promise<string> {
  if (!config.console) throw new UsageError('the console is off (CONSOLE=off): no link would open it.');
  const operator = options.operator === 'true';
  if (operator === (options.user !== undefined)) {
    throw new UsageError('keygate console-link needs --user USER_ID or --operator (one of them).');
  }
  const userId = operator ? null : wholeNumber('--user', options.user, 0, Number.MAX_SAFE_INTEGER);
  const sessionSeconds =
    options['session-seconds'] === undefined
      ? config.consoleSessionSeconds
      : wholeNumber(
          '--session-seconds',
          options['session-seconds'],
          MIN_SESSION_SECONDS,
          MAX_SESSION_SECONDS,
        );
  const opened = await openForCommand(config);
  try {
    const sessions = createSessionService({
      store: opened.sessions,
      clock: systemClock,
      defaultSessionSeconds: config.consoleSessionSeconds,
      consolePath: consolePathOf(config),
    });
    const link = await sessions.issueLink(
      { userId, level: MAX_LEVEL, by: operator ? 'admin:console-link' : 'cli:console-link' },
      sessionSeconds,
    );
    // The link alone, so that a script can take it as it is; it opens one session within 5 minutes.
    return link.url;
  } finally {
    await opened.store.close();
  }
}
