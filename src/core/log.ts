// JSON-line logger. Lines are buffered and written once per event-loop turn so that logging every
// request does not cost a write call each. Callers pass fields, never secrets, tokens or headers.
import { isoFormatter } from './clock';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export type Logger = {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /**
   * An info line whose fields come already written as JSON members (one or more: `"a":1,"b":"x"`,
   * each value as JSON.stringify writes it): the line every request logs, built without an object to copy.
   */
  infoJson(msg: string, members: string): void;
  /** Writes whatever is buffered now. */
  flush(): void;
};

export function createLogger(level: LogLevel, write: (chunk: string) => void = stdoutWrite): Logger {
  const threshold = LOG_LEVELS.indexOf(level);
  let buffer = '';
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (buffer === '') return;
    const chunk = buffer;
    buffer = '';
    write(chunk);
  };
  const append = (line: string) => {
    buffer += line;
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
  const at =
    (lineLevel: Exclude<LogLevel, 'silent'>) =>
    (msg: string, fields?: Record<string, unknown>): void => {
      if (LOG_LEVELS.indexOf(lineLevel) < threshold) return;
      append(`${JSON.stringify({ time: isoTime(), level: lineLevel, msg, ...fields })}\n`);
    };
  const infoEnabled = LOG_LEVELS.indexOf('info') >= threshold;
  const msgJson = jsonStringOf();
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    infoJson(msg: string, members: string): void {
      if (!infoEnabled) return;
      // The same bytes as JSON.stringify({ time, level, msg, ...fields }): the time is an ISO string.
      append(`{"time":"${isoTime()}","level":"info","msg":${msgJson(msg)},${members}}\n`);
    },
    flush,
  };
}

/**
 * JSON.stringify of a string, remembered for the last string given: what a request's line repeats
 * request after request (its message, method and path) is written once, then compared.
 */
export function jsonStringOf(): (text: string) => string {
  let last: string | undefined;
  let json = '';
  return (text) => {
    if (text !== last) {
      json = JSON.stringify(text);
      last = text;
    }
    return json;
  };
}

// Under load many lines share a millisecond: the timestamp is formatted once per millisecond.
const isoTimeOf = isoFormatter();
const isoTime = () => isoTimeOf(Date.now());

function stdoutWrite(chunk: string): void {
  process.stdout.write(chunk);
}

// Deep enough for a query error wrapping the client's; bounded should a cause chain loop.
const MAX_CAUSES = 4;

/**
 * An unexpected error as log fields: its name, message, engine codes and the stack's frames, and its
 * cause the same way. Never a query or its parameters: an error that carries them (drizzle's query
 * error has `query` and `params`, and its message and stack begin with both) is named and told by
 * its cause alone, and a stack keeps only its `at …` frames, never the message lines above them.
 */
export function errorFields(error: unknown, depth = 0): Record<string, unknown> {
  if (!(error instanceof Error)) return { error: typeof error === 'string' ? error : String(error) };
  const carried = error as Error & { code?: unknown; errno?: unknown; query?: unknown; params?: unknown };
  const carriesQuery = 'query' in carried || 'params' in carried;
  const named = error.name === 'Error' ? error.constructor.name : error.name;
  const fields: Record<string, unknown> = { error: named };
  if (!carriesQuery) fields.message = error.message;
  if (typeof carried.code === 'string' || typeof carried.code === 'number') fields.code = carried.code;
  if (typeof carried.errno === 'string' || typeof carried.errno === 'number') fields.errno = carried.errno;
  const frames = (error.stack ?? '')
    .split('\n')
    .filter((line) => /^\s+at /.test(line))
    .map((line) => line.trim());
  if (frames.length > 0) fields.stack = frames.join('\n');
  if (error.cause !== undefined && depth < MAX_CAUSES) fields.cause = errorFields(error.cause, depth + 1);
  return fields;
}
