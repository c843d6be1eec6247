// A fresh keygate with a movable clock, and a tiny request helper for behaviour tests. It runs on an
// in-memory SQLite database, or with KEYGATE_TEST_DATABASE=postgres on a fresh PostgreSQL database
// (test/support/postgres.ts): the same behaviour suite runs on both engines.
import { type Config, loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { createKeygate } from '../../src/keygate';
import type { FlushTimer } from '../../src/usage/flusher';
import { freshPostgresDatabase, TEST_ENGINE } from './postgres';

export const JWT_SECRET = 'test-secret-that-is-at-least-32-bytes-long';
export const START = Date.parse('2026-11-22T10:00:00.000Z');

export type TestResponse = Awaited<ReturnType<TestKeygate['req']>>;

export type TestKeygate = Awaited<ReturnType<typeof testKeygate>>;

/** `recordUsage` false: the bench's build without usage recording (not a setting). */
export async function testKeygate(
  env: Record<string, string> = {},
  {
    recordUsage = true,
    webhookDelivery,
  }: { recordUsage?: boolean; webhookDelivery?: Parameters<typeof createKeygate>[1]['webhookDelivery'] } = {},
) {
  // An identity provider's keys replace the shared secret (only one key source may be set).
  const asymmetric = ['JWT_JWKS_URL', 'JWT_PUBLIC_KEY', 'JWT_PUBLIC_KEY_FILE'].some((name) => name in env);
  const databaseUrl = TEST_ENGINE === 'postgres' ? await freshPostgresDatabase() : ':memory:';
  const config: Config = loadConfig({
    DATABASE_URL: databaseUrl,
    DATABASE_POOL_SIZE: '2',
    ...(asymmetric ? {} : { JWT_SECRET }),
    ...env,
  });
  const time = { now: START };
  const written: string[] = [];
  const logger = createLogger(config.logLevel, (chunk) => written.push(chunk));
  // The usage flush runs when a test says so (usageTick), never on a timer of its own.
  const usageTimer: FlushTimer & { ticks: Array<() => void>; intervalMs?: number } = Object.assign(
    (tick: () => void, ms: number) => {
      usageTimer.ticks.push(tick);
      usageTimer.intervalMs = ms;
      return () => {
        usageTimer.ticks = usageTimer.ticks.filter((other) => other !== tick);
      };
    },
    { ticks: [] as Array<() => void> },
  );
  const keygate = await createKeygate(config, {
    jwtSecret: JWT_SECRET,
    logger,
    clock: () => time.now,
    usageTimer,
    recordUsage,
    // The webhook sender delivers when a test says so (keygate.webhooks.sender.deliverDue()).
    webhookTimer: () => () => undefined,
    webhookDelivery,
  });
  /** Every log line written so far, parsed; `msg` filters them. */
  // biome-ignore lint/suspicious/noExplicitAny: tests assert on whatever fields a line has.
  const logLines = (msg?: string): any[] => {
    logger.flush();
    const lines = written
      .join('')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line));
    return msg === undefined ? lines : lines.filter((line) => line.msg === msg);
  };
  const base = `http://localhost${config.basePath}`;

  /**
   * Sends a request; `body` objects go as JSON with the JSON Content-Type. `peer` is the TCP peer the
   * server would see (default: none, as for a request without a socket).
   */
  async function req(
    method: string,
    path: string,
    init: { headers?: Record<string, string>; body?: unknown; peer?: string } = {},
  ) {
    const headers = new Headers(init.headers);
    // Raw bytes go as they are; a string is sent as JSON text; anything else is serialised to JSON.
    let body: string | Uint8Array | undefined;
    if (init.body instanceof Uint8Array) body = init.body;
    else if (init.body !== undefined) {
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      if (!headers.has('content-type')) headers.set('content-type', 'application/json');
    }
    const peer = init.peer;
    const server = peer === undefined ? undefined : { requestIP: () => ({ address: peer }) };
    const response = await keygate.handle(new Request(`${base}${path}`, { method, headers, body }), server);
    const text = await response.text();
    // biome-ignore lint/suspicious/noExplicitAny: tests read whatever JSON came back and assert on it.
    let json: any;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, text, json };
  }

  /** A token for `sub`: a number, or with JWT_USER_IDS=mapped any subject. */
  const token = (
    sub: number | string,
    options: { level?: number; ttlSeconds?: number; scope?: string } = {},
  ) =>
    keygate.jwt.sign({
      sub: config.jwtUserIds === 'mapped' ? sub : Number(sub),
      level: options.level,
      ttlSeconds: options.ttlSeconds ?? 3600,
      ...(options.scope === undefined ? {} : { scope: options.scope }),
    });

  const bearer = async (sub: number | string, level?: number) => ({
    authorization: `Bearer ${await token(sub, { level })}`,
  });

  /** The operator's credential: a token whose scope holds JWT_ADMIN_SCOPE (or `scope`), for any `sub`. */
  const operator = async (sub = 'ops', scope = config.jwtAdminScope) => ({
    authorization: `Bearer ${await keygate.jwt.sign({ sub, scope, ttlSeconds: 3600 })}`,
  });

  const basic = (key: string, secret: string) => ({
    authorization: `Basic ${Buffer.from(`${key}:${secret}`).toString('base64')}`,
  });

  /** Creates a key through /jwt for `sub` and returns the apikey object. */
  async function createKey(
    sub: number | string,
    body: Partial<{
      name: string;
      level: number;
      expiresIn: number;
      permissions: string[];
      allowedIps: string[];
      meta: Record<string, unknown>;
      ratelimit: { limit: number; duration: number };
      credits: { remaining: number; refill?: { amount: number; interval: number } };
    }> = {},
  ) {
    const response = await req('POST', '/apikeys/jwt', {
      headers: await bearer(sub),
      body: { name: 'test', level: 3, expiresIn: 3600, ...body },
    });
    if (response.status !== 201) throw new Error(`create failed: ${response.status} ${response.text}`);
    return response.json.apikey as {
      key: string;
      secret: string;
      level: number;
      expiresAt: string;
      name: string;
      userId: number;
    };
  }

  /**
   * Sends `json` as a streamed body that records whether anyone read it (highWaterMark 0: nothing is
   * pulled before a read); the status, and whether the body was read.
   */
  async function postTellingIfRead(path: string, headers: Record<string, string>, json: unknown) {
    let read = false;
    const body = new ReadableStream(
      {
        pull(controller) {
          read = true;
          controller.enqueue(new TextEncoder().encode(JSON.stringify(json)));
          controller.close();
        },
      },
      { highWaterMark: 0 },
    );
    const response = await keygate.handle(
      new Request(`${base}${path}`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body,
        duplex: 'half',
      } as RequestInit),
    );
    return { status: response.status, read };
  }

  /** Credentials of user `sub` at `level` for a scheme: a token, or a fresh key of that user. */
  async function credentials(scheme: 'jwt' | 'key', sub: number | string, level = 8) {
    if (scheme === 'jwt') return bearer(sub, level);
    const caller = await createKey(sub, { level, name: 'caller' });
    return basic(caller.key, caller.secret);
  }

  return {
    config,
    keygate,
    time,
    usageTimer,
    /** The usage timer's interval passing: a flush, resolved once written (flusher.test.ts drives the tick). */
    async usageTick() {
      if (usageTimer.ticks.length !== 1) throw new Error('the usage flusher has no timer running');
      await keygate.usageFlusher.flush();
    },
    req,
    token,
    bearer,
    operator,
    basic,
    createKey,
    credentials,
    postTellingIfRead,
    logLines,
    close: () => keygate.close(),
  };
}
