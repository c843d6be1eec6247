// Mapped user ids (JWT_USER_IDS=mapped) across replicas on one PostgreSQL database: replicas meeting a
// new subject at the same moment give it one user id; any replica names a key's owner by its subject;
// and while PostgreSQL is away a subject never met answers 503, while a token already verified still
// verifies (its user id is kept beside it). Runs in `bun run test:postgres`; plain `bun test` skips it.
import { afterAll, describe, expect, it } from 'bun:test';
import { sharedPostgres, startPostgres, TEST_ENGINE, type ThrowawayPostgres } from '../support/postgres';
import { bearerFor, type Replica, startReplicas, stopReplicas } from '../support/replicas';

const MAPPED = { JWT_USER_IDS: 'mapped' };
const createBody = { name: 'replica', level: 3, expiresIn: 3600 };

let server: ThrowawayPostgres | undefined;
afterAll(async () => {
  await stopReplicas();
  server?.destroy();
});

describe.skipIf(TEST_ENGINE !== 'postgres')('mapped user ids across replicas', () => {
  it('three replicas meeting new subjects at the same moment agree on each one’s user id', async () => {
    const { server: shared } = await sharedPostgres();
    const three = await startReplicas(shared.createDatabase(`keygate_subjects_${process.pid}`), 3, MAPPED);
    const subjects = Array.from({ length: 10 }, (_, n) => `auth0|race-${n}`);
    // Every subject, on every replica at once: 30 creates, each the first sight of its subject somewhere.
    const created = await Promise.all(
      subjects.flatMap((subject) =>
        three.map(async (replica) => {
          const response = await replica.req('POST', '/apikeys/jwt', {
            headers: await bearerFor(subject),
            body: createBody,
          });
          expect(response.status).toBe(201);
          return { subject, userId: response.json.apikey.userId as number, key: response.json.apikey };
        }),
      ),
    );
    const idOf = new Map<string, Set<number>>();
    for (const { subject, userId } of created)
      idOf.set(subject, (idOf.get(subject) ?? new Set()).add(userId));
    for (const subject of subjects)
      expect({ subject, ids: idOf.get(subject)?.size }).toEqual({ subject, ids: 1 });
    expect(new Set(created.map(({ userId }) => userId)).size).toBe(subjects.length);
    // Each replica lists all three keys of a subject, and names the owner of a key another one made.
    const [first, second] = three as [Replica, Replica, Replica];
    const listed = await second.req('GET', '/apikeys/jwt', { headers: await bearerFor('auth0|race-0') });
    expect(listed.json.apikeys).toHaveLength(3);
    const madeByFirst = created.find(({ subject }) => subject === 'auth0|race-3')?.key;
    const verified = await second.req('POST', '/apikeys/verify', {
      body: { key: madeByFirst.key, secret: madeByFirst.secret },
    });
    expect(verified.json.principal).toMatchObject({ type: 'key', subject: 'auth0|race-3' });
    expect(first.notJson()).toEqual([]);
  }, 60_000);

  it('while PostgreSQL is down: 503 for a subject never met, VALID for a token already verified', async () => {
    server = await startPostgres();
    const [one] = (await startReplicas(server.url, 1, MAPPED)) as [Replica];
    const known = await bearerFor('okta|00u-known');
    const token = known.authorization?.slice('Bearer '.length);
    expect((await one.req('POST', '/apikeys/verify', { body: { token } })).json.code).toBe('VALID');

    server.stop('immediate');
    const again = await one.req('POST', '/apikeys/verify', { body: { token } });
    expect(again.status).toBe(200);
    expect(again.json.code).toBe('VALID');
    const stranger = await bearerFor('okta|00u-stranger');
    for (const [method, path, init] of [
      ['POST', '/apikeys/verify', { body: { token: stranger.authorization?.slice('Bearer '.length) } }],
      ['GET', '/forward-auth', { headers: stranger }],
      ['GET', '/apikeys/jwt', { headers: stranger }],
    ] as const) {
      const response = await one.req(method, path, init);
      expect({ path, status: response.status, retryAfter: response.headers.get('retry-after') }).toEqual({
        path,
        status: 503,
        retryAfter: '1',
      });
      expect(response.json).toEqual({ result: 'error', error: expect.any(String) });
    }

    server.start();
    const back = async () => (await one.req('GET', '/forward-auth', { headers: stranger })).status;
    const started = performance.now();
    while ((await back()) !== 200 && performance.now() - started < 20_000) await Bun.sleep(100);
    expect(await back()).toBe(200);
    expect(one.lines().filter((line) => line.level === 'error')).toEqual([]);
  }, 90_000);
});
