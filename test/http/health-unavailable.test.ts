// /health while the database does not answer: 503 in the error shape, with Retry-After like every
// other answer that a database outage causes, and 200 again as soon as it answers.
import { expect, it } from 'bun:test';
import { testKeygate } from '../support/keygate';

it('/health answers 503 with Retry-After while the database does not answer, then 200', async () => {
  const kg = await testKeygate();
  try {
    const ping = kg.keygate.store.ping;
    kg.keygate.store.ping = async () => false;
    const down = await kg.req('GET', '/health');
    expect(down.status).toBe(503);
    expect(down.headers.get('retry-after')).toBe('1');
    expect(down.json).toEqual({ result: 'error', error: 'The database does not answer.' });
    kg.keygate.store.ping = ping;
    const up = await kg.req('GET', '/health');
    expect(up.status).toBe(200);
    expect(up.headers.get('retry-after')).toBeNull();
  } finally {
    await kg.keygate.close();
  }
});
