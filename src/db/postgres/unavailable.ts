// Which of the PostgreSQL engine's errors mean "the database cannot answer now" (a 503 that a retry
// may cure) rather than a fault in keygate (a 500). drizzle wraps every failed query in an error of
// its own whose `cause` is the client's, so the whole cause chain is read, not just the outer error.
import { StoreUnavailableError } from '../../apikeys/store';

// Bun's SQL client: the connection was refused, closed, timed out, failed, hit its idle or lifetime
// limit, or could not set up TLS.
const CLIENT_CODES = /^ERR_POSTGRES_(CONNECTION|IDLE|LIFETIME|TLS)/;
// The operating system's socket errors, should one reach us unwrapped.
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);
// The server's SQLSTATE: 08 connection exception; 57P01–57P03 admin shutdown, crash shutdown, cannot
// connect now, and 57P05 an idle session ended by the server; 53 insufficient resources (disk full,
// out of memory, too many connections); 40001/40P01 a serialization failure or deadlock, which a
// retry resolves.
const SERVER_STATES = /^(08|57P0[1235]$|53|40001$|40P01$)/;

// Deep enough for drizzle's wrapper around the client's error, and bounded should a chain loop.
const MAX_CAUSES = 8;

/** The engine's code when `error` or any error in its cause chain means the database is unreachable or busy. */
export function unavailableCode(error: unknown): string | undefined {
  let current = error;
  for (let depth = 0; depth < MAX_CAUSES && typeof current === 'object' && current !== null; depth++) {
    const { code, errno, cause } = current as { code?: unknown; errno?: unknown; cause?: unknown };
    if (typeof code === 'string' && (CLIENT_CODES.test(code) || SOCKET_CODES.has(code))) return code;
    if (typeof errno === 'string' && SERVER_STATES.test(errno)) return errno;
    current = cause;
  }
  return undefined;
}

/** Rethrows `error` as StoreUnavailableError when the database is unavailable, else as it is. */
export function unavailableOr(error: unknown): never {
  const code = unavailableCode(error);
  if (code !== undefined) throw new StoreUnavailableError(code, { cause: error });
  throw error;
}
