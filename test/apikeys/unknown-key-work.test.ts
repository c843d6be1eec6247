// An unknown key does the work a known key with a wrong secret does, so the two cannot be told apart
// by time also when nothing is cached (KEY_CACHE_SECONDS=0): the store reads and decodes a stored row
// for an unknown id too, and the usage counter takes it through a record of the same shape. Proven by
// structure (spies on the row decoding and the counter), never by timing. Runs on both engines.
import { afterEach, beforeAll, beforeEach, describe, expect, it, spyOn } from 'bun:test';
import { generateKeyId, generateSecret } from '../../src/apikeys/secrets';
import * as keyRows from '../../src/db/key-rows';
import { START, type TestKeygate, testKeygate } from '../support/keygate';
import { sharedPostgres, TEST_ENGINE } from '../support/postgres';

// Starting the run's PostgreSQL may take longer than a beforeEach may on a busy machine.
beforeAll(async () => {
  if (TEST_ENGINE === 'postgres') await sharedPostgres();
}, 60_000);

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate({ KEY_CACHE_SECONDS: '0' });
});
afterEach(() => k.close());

/** Three keys made a minute apart; the ids sort by creation time. */
async function threeKeys() {
  const keys = [];
  for (let i = 0; i < 3; i++) {
    k.time.now = START + i * 60_000;
    keys.push(await k.createKey(7, { name: `key ${i}` }));
  }
  return keys;
}

/** The ids of the rows the store decoded while `run` ran. */
async function rowsDecodedBy(run: () => Promise<unknown>): Promise<string[]> {
  const decode = spyOn(keyRows, 'withCredits');
  try {
    await run();
    return decode.mock.calls.map(([row]) => (row as unknown as { id: string }).id);
  } finally {
    decode.mockRestore();
  }
}

describe('the store, asked for an id no key has', () => {
  it('reads and decodes one stored row, as for a known id, and answers none', async () => {
    const keys = await threeKeys();
    const stored = keys.map((key) => key.key);
    const unknown = {
      'between two keys': generateKeyId(START + 30_000),
      'after every key': generateKeyId(START + 3_600_000),
      'before every key': generateKeyId(0),
      'of another shape': 'kg_not-an-id',
    };
    for (const [where, id] of Object.entries(unknown)) {
      let found: unknown = 'not asked';
      const decoded = await rowsDecodedBy(async () => {
        found = await k.keygate.store.findKey(id);
      });
      expect({ where, found, decoded: decoded.length }).toEqual({ where, found: undefined, decoded: 1 });
      expect(stored).toContain(decoded[0] as string);
    }
    const known = keys[1]?.key as string;
    let found: { id: string } | undefined;
    expect(await rowsDecodedBy(async () => (found = await k.keygate.store.findKey(known)))).toEqual([known]);
    expect(found?.id).toBe(known);
  });

  it('answers none and decodes nothing while no key is stored', async () => {
    const decoded = await rowsDecodedBy(async () => {
      expect(await k.keygate.store.findKey(generateKeyId(START))).toBeUndefined();
    });
    expect(decoded).toEqual([]);
  });
});

describe.each([
  ['POST /apikeys/verify', 'verify'],
  ['GET /forward-auth', 'forward-auth'],
  ['GET /apikeys/key', 'key'],
] as const)('%s with KEY_CACHE_SECONDS=0', (_name, route) => {
  const send = (key: string, secret: string) => {
    if (route === 'verify') return k.req('POST', '/apikeys/verify', { body: { key, secret } });
    const path = route === 'key' ? '/apikeys/key' : '/forward-auth';
    return k.req('GET', path, { headers: { 'x-api-key': key, 'x-api-secret': secret } });
  };

  it('decodes one stored row for an unknown key and for a wrong secret, and answers both alike', async () => {
    const keys = await threeKeys();
    const answers: string[] = [];
    for (const key of [generateKeyId(START + 30_000), keys[2]?.key as string]) {
      const decoded = await rowsDecodedBy(async () => {
        const response = await send(key, generateSecret());
        answers.push(`${response.status} ${response.text}`);
      });
      expect(decoded).toHaveLength(1);
    }
    expect(answers[0]).toBe(answers[1] as string);
  });
});

describe('the usage counter, on a verify', () => {
  it('takes an unknown key through a record of its own and a wrong secret through a denied count', async () => {
    const [key] = await threeKeys();
    const counter = k.keygate.usageCounter;
    const record = spyOn(counter, 'record');
    const recordUnknown = spyOn(counter, 'recordUnknown');
    const unknown = generateKeyId(START);
    for (const path of ['/apikeys/verify', '/forward-auth']) {
      const credential = { key: unknown, secret: generateSecret() };
      if (path === '/apikeys/verify') await k.req('POST', path, { body: credential });
      else {
        await k.req('GET', path, {
          headers: { 'x-api-key': credential.key, 'x-api-secret': credential.secret },
        });
      }
    }
    expect(recordUnknown.mock.calls).toEqual([[unknown], [unknown]]);
    expect(record).not.toHaveBeenCalled();

    await k.req('POST', '/apikeys/verify', { body: { key: key?.key, secret: generateSecret() } });
    expect(record.mock.calls).toEqual([[key?.key as string, 'denied']]);
    expect(recordUnknown).toHaveBeenCalledTimes(2);
    record.mockRestore();
    recordUnknown.mockRestore();
  });
});
