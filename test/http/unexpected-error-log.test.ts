// An unexpected store failure answers 500 and logs one line that says what failed (the error's name,
// the engine's code and message, stack frames) but never the query text or its parameters: a failed
// query's user id and key id must not reach the log.

import { describe, expect, it } from 'bun:test';
import { DrizzleQueryError } from 'drizzle-orm/errors';
import { errorFields } from '../../src/core/log';
import { testKeygate } from '../support/keygate';
import { TEST_ENGINE } from '../support/postgres';
import { rawQuery } from '../support/raw-query';

const USER_ID = 48_213;
const KEY_ID = 'kg_7Qm2ZxR9vLp4Tn8WcY3bKd';

/** A failure as drizzle reports one: the query and its parameters, the client's error as its cause. */
function failedQuery(): DrizzleQueryError {
  const cause = Object.assign(new Error('division by zero'), {
    name: 'PostgresError',
    code: 'ERR_POSTGRES_SERVER_ERROR',
    errno: '22012',
  });
  return new DrizzleQueryError(
    'select "id", "user_id" from "api_keys" where ("api_keys"."user_id" = $1 and "api_keys"."id" = $2)',
    [USER_ID, KEY_ID],
    cause,
  );
}

describe('the log line of an unexpected error', () => {
  for (const [how, fail] of [
    ['thrown at once', () => failedQuery()],
    ['rejected later', () => Promise.reject(failedQuery())],
  ] as const) {
    it(`names the failure without the query or its parameters (${how})`, async () => {
      const kg = await testKeygate();
      kg.keygate.store.findKey = () => {
        const failure = fail();
        if (failure instanceof Error) throw failure;
        return failure;
      };
      const response = await kg.req('DELETE', `/apikeys/${KEY_ID}/jwt`, {
        headers: await kg.bearer(USER_ID),
      });
      expect(response.status).toBe(500);
      const [line, ...more] = kg.logLines('unexpected error');
      expect(more).toHaveLength(0);
      expect(line).toMatchObject({
        level: 'error',
        error: 'DrizzleQueryError',
        cause: {
          error: 'PostgresError',
          message: 'division by zero',
          code: 'ERR_POSTGRES_SERVER_ERROR',
          errno: '22012',
        },
      });
      expect(line.stack).toContain('at ');
      // The request's own line names its path, key id included, as every request's does; this one must not.
      const written = JSON.stringify(line);
      expect(written).not.toContain(String(USER_ID));
      expect(written).not.toContain(KEY_ID);
      expect(written).not.toContain('api_keys');
      await kg.keygate.close();
    });
  }

  it.skipIf(TEST_ENGINE !== 'postgres')(
    'names a real failed query on PostgreSQL without its text or the key id',
    async () => {
      const kg = await testKeygate();
      // A fault of keygate's, not the database's availability: the table it reads is not there.
      await rawQuery(kg.keygate, 'ALTER TABLE api_keys RENAME TO api_keys_elsewhere');
      const response = await kg.req('DELETE', `/apikeys/${KEY_ID}/jwt`, {
        headers: await kg.bearer(USER_ID),
      });
      expect(response.status).toBe(500);
      const [line] = kg.logLines('unexpected error');
      expect(line).toMatchObject({ error: 'DrizzleQueryError', cause: { errno: '42P01' } });
      const written = JSON.stringify(line);
      expect(written).not.toContain(KEY_ID);
      expect(written).not.toContain('select');
      await kg.keygate.close();
    },
  );
});

describe('errorFields', () => {
  it('keeps a plain error’s name, message and frames, without the message line of its stack', () => {
    const fields = errorFields(new TypeError('not a function'));
    expect(fields).toMatchObject({ error: 'TypeError', message: 'not a function' });
    expect(
      String(fields.stack)
        .split('\n')
        .every((frame) => frame.startsWith('at ')),
    ).toBe(true);
  });

  it('describes what is not an error as text', () => {
    expect(errorFields('boom')).toEqual({ error: 'boom' });
    expect(errorFields(undefined)).toEqual({ error: 'undefined' });
  });

  it('stops at a cause chain that loops', () => {
    const a: Error = new Error('a');
    a.cause = a;
    expect(JSON.stringify(errorFields(a)).match(/"message":"a"/g)).toHaveLength(5);
  });
});
