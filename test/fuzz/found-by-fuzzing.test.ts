// Concrete requests the hostile-input fuzzer once answered with a 500; each must stay a clean 4xx.
import { afterEach, beforeEach, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
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

it.each([
  ['arrays', (d: number) => `${'['.repeat(d)}${']'.repeat(d)}`],
  ['objects', (d: number) => `${'{"a":'.repeat(d)}1${'}'.repeat(d)}`],
])('a create body nested thousands of %s deep is 400, not a stack overflow', async (_, nest) => {
  for (const depth of [33, 2000, 5000, 8000]) {
    const body = `{"name":${nest(depth)},"level":1,"expiresIn":60}`;
    if (body.length > 16 * 1024) continue;
    const response = await k.req('POST', '/apikeys/jwt', { headers: await k.bearer(42), body });
    await expectCleanError(response, 400);
  }
});

it('a body nested 32 levels deep is judged on its properties as usual', async () => {
  const body = `{"name":${'['.repeat(31)}${']'.repeat(31)},"level":1,"expiresIn":60}`;
  const response = await k.req('POST', '/apikeys/jwt', { headers: await k.bearer(42), body });
  await expectCleanError(response, 400);
  expect(response.json.error).toContain('name');
});

it('brackets inside strings do not count as nesting', async () => {
  const name = `${'[{'.repeat(40)}"\\`;
  const response = await k.req('POST', '/apikeys/jwt', {
    headers: await k.bearer(42),
    body: { name, level: 1, expiresIn: 60 },
  });
  expect(response.status).toBe(201);
  expect(response.json.apikey.name).toBe(name);
});
