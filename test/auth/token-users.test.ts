// From a verified token to its user, with mapped user ids: a token verified once is answered again
// without the store; a pair met once is remembered whatever token carries it, and asked for once
// when first met by several requests together; a failure is not remembered.
import { describe, expect, it } from 'bun:test';
import { StoreUnavailableError } from '../../src/apikeys/store';
import { createJwtAuthority } from '../../src/auth/jwt';
import { cachedSubjects, type SubjectStore } from '../../src/auth/subjects';
import { createTokenUsers } from '../../src/auth/token-users';

const SECRET = 'unit-test-secret-that-is-32-bytes-or-more';
const now = Date.parse('2026-01-01T00:00:00Z');
const jwt = createJwtAuthority({ secret: SECRET, clock: () => now });

/** A SubjectStore in memory that counts what it is asked, and fails while `down`. */
function countingStore() {
  const ids = new Map<string, number>();
  const asked = { userIdOf: 0, subjectOf: 0 };
  const state = { down: false };
  const store: SubjectStore = {
    async userIdOf(issuer, subject) {
      asked.userIdOf++;
      if (state.down) throw new StoreUnavailableError('TEST');
      const pair = `${issuer} ${subject}`;
      if (!ids.has(pair)) ids.set(pair, ids.size + 1);
      return ids.get(pair) as number;
    },
    async findUserId(issuer, subject) {
      return ids.get(`${issuer} ${subject}`);
    },
    async subjectOf(userId) {
      asked.subjectOf++;
      return [...ids].find(([, id]) => id === userId)?.[0].split(' ')[1];
    },
    async recordMode() {
      return undefined;
    },
  };
  return { store, asked, state };
}

describe('mapped token users', () => {
  it('answers a token verified before without asking the store again', async () => {
    const { store, asked } = countingStore();
    const tokens = createTokenUsers({ jwt, mode: 'mapped', subjects: cachedSubjects(store) });
    const token = await jwt.sign({ sub: 'auth0|one', ttlSeconds: 60 });
    const first = await tokens.verify(token);
    expect(first).toEqual({
      ok: true,
      user: {
        userId: 1,
        level: 8,
        expiresAt: now + 60_000,
        subject: 'auth0|one',
        by: 'jwt:auth0|one',
        permissions: [],
        held: expect.any(Object),
      },
    });
    expect(await tokens.verify(token)).toBe(first);
    expect(asked.userIdOf).toBe(1);
  });

  it('asks once for a pair first met by several tokens together, and remembers it for new tokens', async () => {
    const { store, asked } = countingStore();
    const tokens = createTokenUsers({ jwt, mode: 'mapped', subjects: cachedSubjects(store) });
    const many = await Promise.all(
      [1, 2, 3].map((level) => jwt.sign({ sub: 'okta|00u', level, ttlSeconds: 60 })),
    );
    const users = await Promise.all(many.map((token) => tokens.verify(token)));
    expect(users.map((check) => check.ok && check.user.userId)).toEqual([1, 1, 1]);
    await tokens.verify(await jwt.sign({ sub: 'okta|00u', level: 4, ttlSeconds: 60 }));
    expect(asked.userIdOf).toBe(1);
  });

  it('lets the store’s failure through and does not remember it', async () => {
    const { store, asked, state } = countingStore();
    const tokens = createTokenUsers({ jwt, mode: 'mapped', subjects: cachedSubjects(store) });
    const token = await jwt.sign({ sub: 'auth0|later', ttlSeconds: 60 });
    state.down = true;
    await expect(tokens.verify(token)).rejects.toBeInstanceOf(StoreUnavailableError);
    state.down = false;
    expect(await tokens.verify(token)).toMatchObject({ ok: true, user: { userId: 1 } });
    expect(asked.userIdOf).toBe(2);
  });

  it('tells a user id’s subject once from the store, then at once', async () => {
    const { store, asked } = countingStore();
    const subjects = cachedSubjects(store);
    const userId = await store.userIdOf('', 'auth0|owner');
    expect(await subjects.subjectOf(userId)).toBe('auth0|owner');
    expect(subjects.subjectOf(userId)).toBe('auth0|owner');
    expect(await subjects.subjectOf(99)).toBeUndefined();
    expect(await subjects.subjectOf(99)).toBeUndefined();
    expect(asked.subjectOf).toBe(3);
  });

  it('forgets the oldest pair beyond its bound', async () => {
    const { store, asked } = countingStore();
    const subjects = cachedSubjects(store, 2);
    for (const subject of ['a', 'b', 'c']) await subjects.userIdOf('', subject);
    expect(subjects.userIdOf('', 'c')).toBe(3);
    expect(subjects.userIdOf('', 'a')).toBeInstanceOf(Promise);
    expect(asked.userIdOf).toBe(4);
  });
});

describe('numeric token users', () => {
  it('takes the subject as the user id, and refuses one that is not a number (sub-not-numeric)', async () => {
    const tokens = createTokenUsers({ jwt, mode: 'numeric' });
    expect(await tokens.verify(await jwt.sign({ sub: 42, ttlSeconds: 60 }))).toMatchObject({
      ok: true,
      user: { userId: 42, subject: undefined, by: 'jwt:42' },
    });
    expect(await tokens.verify(await jwt.sign({ sub: 'auth0|x', ttlSeconds: 60 }))).toEqual({
      ok: false,
      reason: 'sub-not-numeric',
    });
  });
});
