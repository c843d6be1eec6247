// `keygate serve`: start, say plainly why not when it cannot, stop on SIGTERM or SIGINT, and read the
// forward-auth rules again on SIGHUP.
import { type Config, ConfigError } from '../config';
import { createLogger } from '../core/log';
import { resolveJwtSecret } from '../jwt-secret';
import { type RunningServer, serve } from '../serve';
import { databaseShown } from './database';
import { StartupError } from './errors';

/**
 * `recordUsage`: off only in the bench's own build (bench/keygate-entry.ts). `warnings` are logged
 * first, and written out at once so that they show even when the start then fails.
 */
export async function runServer(
  config: Config,
  { recordUsage, warnings = [] }: { recordUsage?: boolean; warnings?: string[] } = {},
): Promise<number> {
  const logger = createLogger(config.logLevel);
  for (const warning of warnings) logger.warn(warning);
  logger.flush();
  let server: RunningServer;
  try {
    // Before the data directory, the database or the secret exist: a start that cannot listen
    // must leave nothing behind (the port taken by another keygate is the usual case).
    probeListen(config);
    // With an identity provider's keys no secret is read or created.
    const jwtSecret = config.jwtKeySource === 'secret' ? resolveJwtSecret(config) : undefined;
    server = await serve(config, { jwtSecret, logger, recordUsage });
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    const { code, syscall } = error as { code?: string; syscall?: string };
    const listening = syscall === 'listen' ? LISTEN_FAILURES[code ?? ''] : undefined;
    throw new StartupError(
      listening
        ? `cannot listen on ${config.host}:${config.port}: ${listening(config)}`
        : `cannot start with database ${databaseShown(config.database)} on ${config.host}:${config.port}: ${(error as Error).message}`,
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
    // Without a handler SIGHUP would end the process; with no rules file it changes nothing.
    process.on('SIGHUP', () => server.reloadForwardAuthRules());
  });
}

/** Binds HOST:PORT and lets go at once; throws Bun's listen error (code, syscall) when it cannot. */
function probeListen(config: Config): void {
  Bun.listen({ hostname: config.host, port: config.port, socket: { data() {} } }).stop(true);
}

// Bun's own message for these is the same for all ("Is port 0 in use?"); the code says which.
const LISTEN_FAILURES: Record<string, (config: Config) => string> = {
  EADDRINUSE: (config) => `port ${config.port} is already in use there (another keygate?).`,
  EADDRNOTAVAIL: (config) =>
    `${config.host} is not an address of this machine, so nothing can listen on it (HOST; 0.0.0.0 means every address).`,
  EINVAL: (config) =>
    `${config.host} is not an address keygate can listen on (HOST must be an IP address of this machine or a name for one).`,
  EACCES: (config) => `port ${config.port} needs privileges this process lacks (use a port above 1023).`,
};
