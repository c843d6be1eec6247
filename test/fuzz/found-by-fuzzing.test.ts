// Concrete requests the hostile-input fuzzer once answered with a 500; each must stay a clean 4xx.
import { afterEach, beforeEach, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(() => {
  k = testKeygate();
});
afterEach(() => k.close());

async function expectCleanError(response: Awaited<ReturnType<TestKeygate['req']>>, status: number) {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toBe('application/json');
  expect(response.json).toEqual({ result: 'error', error: expect.any(String) });
}

it.each(['%zz', '%', '7%', '%C0%AF', '%E0%A4%A', 'kg_aaaaaaaaaaaaaaaaaaaaaa%FF'])(
  'a key id that is not valid percent-encoding (%s) is 400, after authentication',
  async (segment) => {
    for (const scheme of ['jwt', 'key'] as const) {
      await expectCleanError(await k.req('DELETE', `/apikeys/${segment}/${scheme}`), 401);
    }
    const response = await k.req('DELETE', `/apikeys/${segment}/jwt`, { headers: await k.bearer(42) });
    await expectCleanError(response, 400);
  },
);
