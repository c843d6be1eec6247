// The SubjectStore on each engine (KEYGATE_TEST_DATABASE=postgres for PostgreSQL): a pair gets one
// positive id, kept; another issuer is another user; an id is never given twice, even after its row
// is gone; two stores on one database meeting a new pair together agree; and the user-id mode is
// recorded once, changed only while the database holds no keys.
import { afterEach, describe, expect, it } from 'bun:test';
import type { ApiKeyStore } from '../../src/apikeys/store';
import type { SubjectStore } from '../../src/auth/subjects';
import { openPostgres } from '../../src/db/postgres/open';
import { createPostgresApiKeyStore } from '../../src/db/postgres/store';
import { createPostgresSubjectStore } from '../../src/db/postgres/subjects';
import { openDatabase } from '../../src/db/sqlite/open';
import { createSqliteApiKeyStore } from '../../src/db/sqlite/store';
import { createSqliteSubjectStore } from '../../src/db/sqlite/subjects';
import { freshPostgresDatabase, TEST_ENGINE } from '../support/postgres';
import { id, row } from '../support/rows';

type Opened = { keys: ApiKeyStore; subjects: SubjectStore; raw(query: string): Promise<unknown> };

const closing: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

/** A fresh database and a way to open more stores on it (replicas, on PostgreSQL). */
async function freshDatabase(): Promise<() => Promise<Opened>> {
  if (TEST_ENGINE === 'postgres') {
    const url = await freshPostgresDatabase();
    return async () => {
      const db = await openPostgres(url, 2);
      const keys = await createPostgresApiKeyStore(db, { listen: false });
      closing.push(() => keys.close());
      return { keys, subjects: createPostgresSubjectStore(db), raw: (query) => db.$client.unsafe(query) };
    };
  }
  const db = openDatabase(':memory:');
  const keys = createSqliteApiKeyStore(db);
  closing.push(() => keys.close());
  const opened = {
    keys,
    subjects: createSqliteSubjectStore(db, keys.write),
    raw: async (query: string) => db.$client.run(query),
  };
  // One in-memory database has one connection: a "second replica" is the same store.
  return async () => opened;
}

describe(`SubjectStore on ${TEST_ENGINE}`, () => {
  it('gives a pair one positive id, the same every time, and tells the subject back', async () => {
    const { subjects } = await (await freshDatabase())();
    const first = await subjects.userIdOf('https://idp.example/', 'auth0|5f1b2c');
    expect(Number.isSafeInteger(first) && first > 0).toBe(true);
    expect(await subjects.userIdOf('https://idp.example/', 'auth0|5f1b2c')).toBe(first);
    expect(await subjects.subjectOf(first)).toBe('auth0|5f1b2c');
    expect(await subjects.subjectOf(first + 1000)).toBeUndefined();
  });

  it('gives the same subject under another issuer (or none) another id', async () => {
    const { subjects } = await (await freshDatabase())();
    const ids = [
      await subjects.userIdOf('https://a.example/', '42'),
      await subjects.userIdOf('https://b.example/', '42'),
      await subjects.userIdOf('', '42'),
    ];
    expect(new Set(ids).size).toBe(3);
  });

  it('never gives an id twice, even after its row was removed', async () => {
    const { subjects, raw } = await (await freshDatabase())();
    const first = await subjects.userIdOf('', 'first');
    await raw('DELETE FROM subjects');
    const second = await subjects.userIdOf('', 'second');
    expect(second).toBeGreaterThan(first);
    expect(await subjects.subjectOf(first)).toBeUndefined();
  });

  it('agrees with itself and another replica when both meet new pairs at the same moment', async () => {
    const open = await freshDatabase();
    const [one, two] = [await open(), await open()];
    const names = Array.from({ length: 20 }, (_, n) => `00u${n}`);
    const fromOne = Promise.all(names.map((name) => one.subjects.userIdOf('okta', name)));
    const fromTwo = Promise.all(names.map((name) => two.subjects.userIdOf('okta', name)));
    const [a, b] = await Promise.all([fromOne, fromTwo]);
    expect(a).toEqual(b);
    expect(new Set(a).size).toBe(names.length);
  });

  describe('recordMode', () => {
    it('records the first mode; a database without keys takes the other one', async () => {
      const { subjects } = await (await freshDatabase())();
      expect(await subjects.recordMode('mapped')).toBeUndefined();
      expect(await subjects.recordMode('mapped')).toBeUndefined();
      expect(await subjects.recordMode('numeric')).toBeUndefined();
      expect(await subjects.recordMode('numeric')).toBeUndefined();
    });

    it('refuses the other mode once the database holds keys, and names the recorded one', async () => {
      const { subjects, keys } = await (await freshDatabase())();
      expect(await subjects.recordMode('mapped')).toBeUndefined();
      await keys.insertKeyWithinLimit(row(id(1)), 10);
      expect(await subjects.recordMode('numeric')).toBe('mapped');
      expect(await subjects.recordMode('mapped')).toBeUndefined();
    });

    it('takes a database with keys and no record to hold numeric user ids', async () => {
      const { subjects, keys } = await (await freshDatabase())();
      await keys.insertKeyWithinLimit(row(id(1)), 10);
      expect(await subjects.recordMode('mapped')).toBe('numeric');
      expect(await subjects.recordMode('numeric')).toBeUndefined();
      expect(await subjects.recordMode('mapped')).toBe('numeric');
    });
  });
});
