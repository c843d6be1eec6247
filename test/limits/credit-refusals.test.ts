// A refusal for credits never turns another verification into RATE_LIMITED (only VALID answers
// use the limit): a verification whose pool visibly cannot pay takes no admission at all, and one
// refused by the limiter only because admissions still waiting for their credits take hold the window
// waits for them to settle. Concurrent mixes on an injected clock, on both engines
// (KEYGATE_TEST_DATABASE=postgres).
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeAll(async () => {
  k = await testKeygate();
});
afterAll(() => k.close());

type Key = { key: string; secret: string };
let nextUser = 700;

async function create(settings: Record<string, unknown>): Promise<Key> {
  const response = await k.req('POST', '/apikeys/jwt', {
    headers: await k.bearer(nextUser++),
    body: { name: 'paying', level: 1, expiresIn: 3600, ...settings },
  });
  if (response.status !== 201) throw new Error(`create failed: ${response.status} ${response.text}`);
  return response.json.apikey;
}

const verify = (key: Key, cost: number) =>
  k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret, cost } });

/** The codes of the answers to `costs`, all sent at once, by cost. */
async function sentAtOnce(key: Key, costs: number[]) {
  const answers = await Promise.all(costs.map((cost) => verify(key, cost)));
  const byCost: Record<number, Record<string, number>> = {};
  for (const [i, answer] of answers.entries()) {
    const codes = byCost[costs[i] as number] ?? {};
    codes[answer.json.code] = (codes[answer.json.code] ?? 0) + 1;
    byCost[costs[i] as number] = codes;
  }
  return byCost;
}

describe('a refusal for credits', () => {
  it('holds no slot of the rate limit: 10 verifies of cost 1000 and 10 of cost 1 at once against 10 per 60 s and 50 credits', async () => {
    const key = await create({ ratelimit: { limit: 10, duration: 60 }, credits: { remaining: 50 } });
    const costs = Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? 1000 : 1));
    // 50 < 1000: no cost-1000 verify uses a slot, so all 10 cost-1 ones pass. A cost-1000 one decided
    // after the ten filled the window is RATE_LIMITED (that verdict comes first), else USAGE_EXCEEDED.
    const answered = await sentAtOnce(key, costs);
    expect(answered[1]).toEqual({ VALID: 10 });
    const refused = answered[1000] ?? {};
    expect((refused.USAGE_EXCEEDED ?? 0) + (refused.RATE_LIMITED ?? 0)).toBe(10);
    expect(Object.keys(refused).every((code) => code === 'USAGE_EXCEEDED' || code === 'RATE_LIMITED')).toBe(
      true,
    );
    const after = (await verify(key, 0)).json;
    expect(after).toMatchObject({ code: 'RATE_LIMITED', ratelimit: { remaining: 0 } });
    expect((await verify(key, 1000)).json).toMatchObject({ code: 'RATE_LIMITED' });
    k.time.now += 60_000;
    expect((await verify(key, 1)).json).toMatchObject({ code: 'VALID', credits: { remaining: 39 } });
  });

  it('turns no verification into RATE_LIMITED when the pool runs out within a burst: 15 of cost 1 against 10 per 60 s and 5 credits', async () => {
    const key = await create({ ratelimit: { limit: 10, duration: 60 }, credits: { remaining: 5 } });
    // The pool looks able to pay for each one; 5 are taken, the other 10 refused for credits, and
    // none of those may have held a slot another one needed.
    expect(await sentAtOnce(key, Array(15).fill(1))).toEqual({ 1: { VALID: 5, USAGE_EXCEEDED: 10 } });
    // Only the 5 VALID answers used the limit.
    expect((await verify(key, 0)).json).toMatchObject({ code: 'VALID', ratelimit: { remaining: 4 } });
  });

  it('turns no verification of another key of the user into RATE_LIMITED on the shared window', async () => {
    const userId = nextUser++;
    const put = await k.req('PUT', `/admin/users/${userId}/policy`, {
      headers: await k.operator('ops'),
      body: { ratelimit: { limit: 10, duration: 60 }, credits: null, maxKeys: null, maxLevel: null },
    });
    expect(put.status).toBe(200);
    const keyOf = async (settings: Record<string, unknown>) => {
      const created = await k.req('POST', '/apikeys/jwt', {
        headers: await k.bearer(userId),
        body: { name: 'shared', level: 1, expiresIn: 3600, ...settings },
      });
      expect(created.status).toBe(201);
      return created.json.apikey as Key;
    };
    const paying = await keyOf({ credits: { remaining: 5 } });
    const free = await keyOf({});
    // The paying key can pass 5 times (its credits), so the window of 10 always has room for the free
    // key's 5: whichever order the 15 are decided in, they are all VALID. The paying key's other 5 are
    // refused, for credits or (when the free key's took their slots first) for the full window.
    const answers = await Promise.all([
      ...Array.from({ length: 10 }, () => verify(paying, 1)),
      ...Array.from({ length: 5 }, () => verify(free, 1)),
    ]);
    const codes = answers.map((answer) => answer.json.code);
    expect(codes.slice(10)).toEqual(Array(5).fill('VALID'));
    expect(codes.slice(0, 10).filter((code) => code === 'VALID')).toHaveLength(5);
    const refused = codes.slice(0, 10).filter((code) => code !== 'VALID');
    expect(refused.every((code) => code === 'USAGE_EXCEEDED' || code === 'RATE_LIMITED')).toBe(true);
  });

  it('still answers RATE_LIMITED first when the window is full, whatever the credits', async () => {
    const key = await create({ ratelimit: { limit: 1, duration: 60 }, credits: { remaining: 3 } });
    expect((await verify(key, 1)).json.code).toBe('VALID');
    expect((await verify(key, 1000)).json.code).toBe('RATE_LIMITED');
    expect((await verify(key, 1)).json.code).toBe('RATE_LIMITED');
  });
});
