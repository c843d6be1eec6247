// The operator's webhook routes: create with a secret shown once, list, get, update, delete,
// rotate the secret, messages and retry; 401 without the operator's token, 400 for bad bodies, 404
// for unknown ids. On both engines.
import { afterEach, describe, expect, it, setDefaultTimeout } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

// On PostgreSQL the first test of a run also creates the template database.
setDefaultTimeout(30_000);

let kg: TestKeygate | undefined;
afterEach(async () => {
  await kg?.close();
  kg = undefined;
});

const E_KEYS = ['createdAt', 'description', 'enabled', 'events', 'id', 'url'];

describe('/admin/webhooks', () => {
  it('creates an endpoint with a whsec_ secret shown once, lists, gets, updates and deletes it', async () => {
    kg = await testKeygate();
    const ops = await kg.operator();
    const created = await kg.req('POST', '/admin/webhooks', {
      headers: ops,
      body: {
        url: 'https://hooks.example.com/keygate',
        events: ['key.created', 'key.deleted'],
        description: 'ops',
      },
    });
    expect(created.status).toBe(201);
    expect(created.json.result).toBe('success');
    expect(created.json.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(created.json.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);
    const endpoint = created.json.endpoint;
    expect(Object.keys(endpoint).sort()).toEqual(E_KEYS);
    expect(endpoint).toMatchObject({
      url: 'https://hooks.example.com/keygate',
      events: ['key.created', 'key.deleted'],
      description: 'ops',
      enabled: true,
      createdAt: new Date(kg.time.now).toISOString(),
    });
    const list = await kg.req('GET', '/admin/webhooks', { headers: ops });
    expect(list.json).toEqual({ result: 'success', endpoints: [endpoint] });
    expect(list.text).not.toContain(created.json.secret);
    expect((await kg.req('GET', `/admin/webhooks/${endpoint.id}`, { headers: ops })).json).toEqual({
      result: 'success',
      endpoint,
    });
    const patched = await kg.req('PATCH', `/admin/webhooks/${endpoint.id}`, {
      headers: ops,
      body: { events: ['*'], description: null, enabled: false, url: 'https://other.example.com/' },
    });
    expect(patched.status).toBe(200);
    expect(patched.json.endpoint).toEqual({
      ...endpoint,
      events: ['*'],
      description: null,
      enabled: false,
      url: 'https://other.example.com/',
    });
    expect((await kg.req('DELETE', `/admin/webhooks/${endpoint.id}`, { headers: ops })).status).toBe(204);
    expect((await kg.req('GET', `/admin/webhooks/${endpoint.id}`, { headers: ops })).status).toBe(404);
    expect((await kg.req('GET', '/admin/webhooks', { headers: ops })).json.endpoints).toEqual([]);
  });

  it('rotates the secret: a new whsec_, shown once', async () => {
    kg = await testKeygate();
    const ops = await kg.operator();
    const created = await kg.req('POST', '/admin/webhooks', {
      headers: ops,
      body: { url: 'https://hooks.example.com/', events: ['*'] },
    });
    const rotated = await kg.req('POST', `/admin/webhooks/${created.json.endpoint.id}/secret`, {
      headers: ops,
    });
    expect(rotated.status).toBe(201);
    expect(rotated.json).toEqual({ result: 'success', secret: expect.stringMatching(/^whsec_/) });
    expect(rotated.json.secret).not.toBe(created.json.secret);
  });

  it('answers 404 for unknown endpoints and messages', async () => {
    kg = await testKeygate();
    const ops = await kg.operator();
    for (const [method, path] of [
      ['GET', '/admin/webhooks/whe_nope'],
      ['PATCH', '/admin/webhooks/whe_nope'],
      ['DELETE', '/admin/webhooks/whe_nope'],
      ['POST', '/admin/webhooks/whe_nope/secret'],
      ['GET', '/admin/webhooks/whe_nope/messages'],
      ['POST', '/admin/webhooks/whe_nope/messages/msg_nope/retry'],
    ] as const) {
      const response = await kg.req(method, path, {
        headers: ops,
        ...(method === 'PATCH' ? { body: { enabled: true } } : {}),
      });
      expect([method, path, response.status]).toEqual([method, path, 404]);
      expect(response.json.result).toBe('error');
    }
    const created = await kg.req('POST', '/admin/webhooks', {
      headers: ops,
      body: { url: 'https://a.example/', events: ['*'] },
    });
    const retry = await kg.req(
      'POST',
      `/admin/webhooks/${created.json.endpoint.id}/messages/msg_nope/retry`,
      { headers: ops },
    );
    expect(retry.status).toBe(404);
  });

  it('needs the operator token: 401 without one, 403 without the scope', async () => {
    kg = await testKeygate();
    expect((await kg.req('GET', '/admin/webhooks')).status).toBe(401);
    const noScope = { authorization: `Bearer ${await kg.token(5)}` };
    expect((await kg.req('POST', '/admin/webhooks', { headers: noScope, body: { bad: true } })).status).toBe(
      403,
    );
    // Credentials first: a bad body without them is 401.
    expect((await kg.req('POST', '/admin/webhooks', { body: 'nonsense' })).status).toBe(401);
  });

  it.each([
    [{ url: 'https://h.example/', events: ['key.created', 'key.exploded'] }, 'Unknown event "key.exploded"'],
    [{ url: 'https://h.example/', events: [] }, 'events must be a non-empty array'],
    [{ url: 'https://h.example/' }, 'events must be a non-empty array'],
    [{ url: 'https://h.example/', events: ['*', 'key.created'] }, 'events may be ["*"] alone'],
    [{ url: 'https://h.example/', events: ['key.created', 'key.created'] }, 'must not name an event twice'],
    [{ url: 'http://h.example/', events: ['*'] }, 'url must be an https URL'],
    [{ url: 'https://127.0.0.1/', events: ['*'] }, 'loopback, private'],
    [{ url: 'https://[::1]:8443/', events: ['*'] }, 'loopback, private'],
    [{ url: 'https://10.1.2.3/', events: ['*'] }, 'loopback, private'],
    [{ url: 'https://192.168.0.7/', events: ['*'] }, 'loopback, private'],
    [{ url: 'https://169.254.169.254/', events: ['*'] }, 'loopback, private'],
    [{ url: 'https://0.0.0.0/', events: ['*'] }, 'loopback, private'],
    [{ url: 'https://[::ffff:127.0.0.1]/', events: ['*'] }, 'loopback, private'],
    [{ url: 'https://[fe80::1]/', events: ['*'] }, 'loopback, private'],
    [{ url: 'not a url', events: ['*'] }, 'absolute https URL'],
    [{ url: 'https://h.example/', events: ['*'], extra: 1 }, 'Unknown property "extra"'],
    [{ url: 'https://h.example/', events: ['*'], description: 5 }, 'description must be a string'],
  ])('refuses the body %j with 400', async (body, problem) => {
    kg = await testKeygate();
    const response = await kg.req('POST', '/admin/webhooks', { headers: await kg.operator(), body });
    expect(response.status).toBe(400);
    expect(response.json.error).toContain(problem);
  });

  it('refuses a bad update with 400 and changes nothing', async () => {
    kg = await testKeygate();
    const ops = await kg.operator();
    const created = await kg.req('POST', '/admin/webhooks', {
      headers: ops,
      body: { url: 'https://h.example/', events: ['*'] },
    });
    const id = created.json.endpoint.id;
    for (const body of [
      { events: ['nope'] },
      { enabled: 'yes' },
      { url: 'https://127.0.0.1/' },
      { secret: 'x' },
      [],
    ]) {
      expect((await kg.req('PATCH', `/admin/webhooks/${id}`, { headers: ops, body })).status).toBe(400);
    }
    expect((await kg.req('GET', `/admin/webhooks/${id}`, { headers: ops })).json.endpoint).toEqual(
      created.json.endpoint,
    );
  });

  it('with WEBHOOK_ALLOW_PRIVATE=true takes http and private addresses', async () => {
    kg = await testKeygate({ WEBHOOK_ALLOW_PRIVATE: 'true' });
    const ops = await kg.operator();
    for (const url of ['http://127.0.0.1:9/x', 'https://10.0.0.1/', 'http://[::1]:8080/']) {
      expect(
        (await kg.req('POST', '/admin/webhooks', { headers: ops, body: { url, events: ['*'] } })).status,
      ).toBe(201);
    }
  });
});
