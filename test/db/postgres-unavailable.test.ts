// Which PostgreSQL failures the store answers as "unavailable" (503) and which stay faults (500):
// the classification over the shapes Bun's client and drizzle throw, then every store method against
// a server stopped at once, and while a query is in flight. The second half runs in
// `bun run test:postgres`; plain `bun test` runs the first.
import { afterAll, describe, expect, it } from 'bun:test';
import { DrizzleQueryError } from 'drizzle-orm/errors';
import { type ApiKeyStore, StoreUnavailableError } from '../../src/apikeys/store';
import { openPostgres } from '../../src/db/postgres/open';
import { createPostgresApiKeyStore } from '../../src/db/postgres/store';
import { unavailableCode } from '../../src/db/postgres/unavailable';
import { startPostgres, TEST_ENGINE, type ThrowawayPostgres } from '../support/postgres';
import { id, row } from '../support/rows';

/** An error as Bun's SQL client throws it: a client `code`, and the server's SQLSTATE as `errno`. */
const clientError = (code: string, errno?: string) =>
  Object.assign(new Error('from the client'), { name: 'PostgresError', code, errno });
/** As drizzle wraps it: the query and its parameters, the client's error as `cause`. */
const wrapped = (cause: Error) =>
  new DrizzleQueryError('select * from api_keys where id = $1', ['kg_x'], cause);

describe('the unavailability classification', () => {
  const unavailable: Array<[string, unknown, string]> = [
    ['refused (measured)', clientError('ERR_POSTGRES_CONNECTION_REFUSED'), 'ERR_POSTGRES_CONNECTION_REFUSED'],
    [
      'closed in flight (measured)',
      clientError('ERR_POSTGRES_CONNECTION_CLOSED'),
      'ERR_POSTGRES_CONNECTION_CLOSED',
    ],
    [
      'connect timeout (measured)',
      clientError('ERR_POSTGRES_CONNECTION_TIMEOUT'),
      'ERR_POSTGRES_CONNECTION_TIMEOUT',
    ],
    ['connect failed', clientError('ERR_POSTGRES_CONNECTION_FAILED'), 'ERR_POSTGRES_CONNECTION_FAILED'],
    ['idle timeout', clientError('ERR_POSTGRES_IDLE_TIMEOUT'), 'ERR_POSTGRES_IDLE_TIMEOUT'],
    ['lifetime timeout', clientError('ERR_POSTGRES_LIFETIME_TIMEOUT'), 'ERR_POSTGRES_LIFETIME_TIMEOUT'],
    ['TLS upgrade failed', clientError('ERR_POSTGRES_TLS_UPGRADE_FAILED'), 'ERR_POSTGRES_TLS_UPGRADE_FAILED'],
    ['admin shutdown (measured)', clientError('ERR_POSTGRES_SERVER_ERROR', '57P01'), '57P01'],
    ['crash shutdown', clientError('ERR_POSTGRES_SERVER_ERROR', '57P02'), '57P02'],
    ['cannot connect now', clientError('ERR_POSTGRES_SERVER_ERROR', '57P03'), '57P03'],
    ['connection failure', clientError('ERR_POSTGRES_SERVER_ERROR', '08006'), '08006'],
    ['too many connections', clientError('ERR_POSTGRES_SERVER_ERROR', '53300'), '53300'],
    ['disk full', clientError('ERR_POSTGRES_SERVER_ERROR', '53100'), '53100'],
    ['serialization failure', clientError('ERR_POSTGRES_SERVER_ERROR', '40001'), '40001'],
    ['deadlock', clientError('ERR_POSTGRES_SERVER_ERROR', '40P01'), '40P01'],
    [
      'a socket refused',
      Object.assign(new Error('refused'), { code: 'ECONNREFUSED', errno: -111 }),
      'ECONNREFUSED',
    ],
    ['a socket reset', Object.assign(new Error('reset'), { code: 'ECONNRESET', errno: -104 }), 'ECONNRESET'],
  ];
  for (const [what, error, code] of unavailable) {
    it(`${what}: unavailable, bare and wrapped by drizzle`, () => {
      expect(unavailableCode(error)).toBe(code);
      expect(unavailableCode(wrapped(error as Error))).toBe(code);
    });
  }

  const faults: Array<[string, unknown]> = [
    ['division by zero', clientError('ERR_POSTGRES_SERVER_ERROR', '22012')],
    ['unique violation', clientError('ERR_POSTGRES_SERVER_ERROR', '23505')],
    ['undefined table', clientError('ERR_POSTGRES_SERVER_ERROR', '42P01')],
    ['a database dropped', clientError('ERR_POSTGRES_SERVER_ERROR', '57P04')],
    ['a syntax error in the client', clientError('ERR_POSTGRES_SYNTAX_ERROR')],
    ['a plain error', new Error('boom')],
    ['not an error', 'boom'],
    ['nothing', undefined],
  ];
  for (const [what, error] of faults) {
    it(`${what}: not unavailable, bare and wrapped by drizzle`, () => {
      expect(unavailableCode(error)).toBeUndefined();
      expect(unavailableCode(wrapped(error as Error))).toBeUndefined();
    });
  }

  it('stops at a cause chain that loops', () => {
    const a: Error & { cause?: unknown } = new Error('a');
    a.cause = new Error('b', { cause: a });
    expect(unavailableCode(a)).toBeUndefined();
  });
});

describe.skipIf(TEST_ENGINE !== 'postgres')('every PostgreSQL store method while the server is down', () => {
  // Its own server: stopping the run's shared one would stop every other test's databases.
  let server: ThrowawayPostgres | undefined;
  afterAll(() => server?.destroy());

  const methods: Array<[string, (store: ApiKeyStore) => unknown]> = [
    ['findKey (the key cache reads through it)', (store) => store.findKey(id(1))],
    [
      'listLiveKeys',
      (store) => store.listLiveKeys({ userId: 1, now: 2000, maxLevel: 9, after: undefined, limit: 10 }),
    ],
    ['insertKeyWithinLimit', (store) => store.insertKeyWithinLimit(row(id(2)), 10)],
    ['deleteKey', (store) => store.deleteKey(id(1))],
    [
      'rotateKey',
      (store) => store.rotateKey({ previousId: id(1), previousExpiresAt: 2000, next: row(id(3)), limit: 10 }),
    ],
    ['deleteExpiredBatch (the purge)', (store) => store.deleteExpiredBatch(200_000, 10)],
  ];

  it('rejects with StoreUnavailableError, in flight and after, and answers again once it is back', async () => {
    server = await startPostgres();
    const writes: boolean[] = [];
    const store = await createPostgresApiKeyStore(await openPostgres(server.url, 4), {
      listen: false,
      onWrite: (committed) => writes.push(committed),
    });
    try {
      await store.insertKeyWithinLimit(row(id(1)), 10);
      // A read and a write on their way when the server dies: their connections close under them.
      const inFlight = [
        store.listLiveKeys({ userId: 1, now: 2000, maxLevel: 9, after: undefined, limit: 10 }),
        store.insertKeyWithinLimit(row(id(4), { userId: 2 }), 10),
      ].map((promise) =>
        promise.then(
          () => 'answered',
          (error: unknown) => error,
        ),
      );
      server.stop('immediate');
      for (const outcome of await Promise.all(inFlight)) {
        if (outcome !== 'answered') expect(outcome).toBeInstanceOf(StoreUnavailableError);
      }
      for (const [name, call] of methods) {
        const error = await Promise.resolve()
          .then(() => call(store))
          .then(
            () => undefined,
            (failure: unknown) => failure,
          );
        expect({ name, error }).toEqual({ name, error: expect.any(StoreUnavailableError) });
        // Refused, or closed when the pool hands out a connection the server dropped.
        expect((error as StoreUnavailableError).code).toMatch(/^ERR_POSTGRES_CONNECTION_(REFUSED|CLOSED)$/);
      }
      expect(await store.ping()).toBe(false);
      // The write outcomes the writable gauge follows: the first insert committed, then refusals.
      expect(writes[0]).toBe(true);
      expect(writes.at(-1)).toBe(false);

      server.start();
      expect(await store.ping()).toBe(true);
      expect((await store.findKey(id(1)))?.id).toBe(id(1));
      expect(await store.insertKeyWithinLimit(row(id(5)), 10)).toBe('inserted');
      expect(writes.at(-1)).toBe(true);
    } finally {
      await store.close();
    }
  }, 60_000);
});
