// The HTTP surface around the endpoints: 404s, health, the OpenAPI document, BASE_PATH, request ids,
// security headers, and request logs that never carry a secret, a token or an Authorization header.
import { describe, expect, it } from 'bun:test';
import { StoreUnavailableError } from '../../src/apikeys/store';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { createKeygate } from '../../src/keygate';
import { JWT_SECRET, testKeygate } from '../support/keygate';

describe('unknown paths', () => {
  it.each([
    ['GET', '/'],
    ['GET', '/nope'],
    ['GET', '/apikeys/verify'],
    ['PUT', '/apikeys/jwt'],
    ['POST', '/apikeys/other'],
    ['DELETE', '/apikeys/kg_0000000000000000000000'],
    ['PATCH', '/health'],
    ['POST', '/apikeys/jwt/'],
    ['GET', '/health/'],
  ])('%s %s answers 404 in the error shape', async (method, path) => {
    const k = await testKeygate();
    const response = await k.req(method, path);
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toStartWith('application/json');
    expect(response.json).toEqual({ result: 'error', error: expect.any(String) });
  });
});

describe('GET /health', () => {
  it('answers 200 {"status":"ok"} while the database answers, 503 after it closed', async () => {
    const k = await testKeygate();
    const ok = await k.req('GET', '/health');
    expect(ok.status).toBe(200);
    expect(ok.json).toEqual({ status: 'ok' });
    await k.keygate.close();
    const down = await k.req('GET', '/health');
    expect(down.status).toBeGreaterThanOrEqual(500);
    expect(down.json.result).toBe('error');
  });
});

describe('GET /openapi', () => {
  it('serves a reference page and a JSON document that lists the four endpoints', async () => {
    const k = await testKeygate();
    const page = await k.req('GET', '/openapi');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    const doc = await k.req('GET', '/openapi/json');
    expect(doc.status).toBe(200);
    expect(doc.json.openapi).toStartWith('3.');
    expect(Object.keys(doc.json.paths)).toEqual(
      expect.arrayContaining([
        '/apikeys/jwt',
        '/apikeys/key',
        '/apikeys/{id}/jwt',
        '/apikeys/{id}/key',
        '/health',
      ]),
    );
    const create = doc.json.paths['/apikeys/jwt'].post;
    expect(JSON.stringify(create.requestBody)).toContain('#/components/schemas/CreateKeyRequest');
    expect(Object.keys(doc.json.components.schemas.CreateKeyRequest.properties)).toContain('expiresIn');
  });
});

describe('BASE_PATH', () => {
  it('serves every path under the prefix and nothing outside it', async () => {
    const k = await testKeygate({ BASE_PATH: '/auth' });
    expect((await k.req('GET', '/health')).status).toBe(200);
    const key = await k.createKey(1);
    expect((await k.req('DELETE', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(1) })).status).toBe(
      204,
    );
    const outside = await k.keygate.handle(new Request('http://localhost/health'));
    expect(outside.status).toBe(404);
  });

  it('serves verify and forward-auth (answered before Elysia routes) under the prefix only', async () => {
    const k = await testKeygate({ BASE_PATH: '/auth' });
    const key = await k.createKey(1);
    const verified = await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
    expect(verified.json).toMatchObject({ valid: true, code: 'VALID' });
    const allowed = await k.req('GET', '/forward-auth/app', { headers: k.basic(key.key, key.secret) });
    expect(allowed.status).toBe(200);
    for (const [method, path] of [
      ['POST', '/apikeys/verify'],
      ['GET', '/forward-auth'],
      ['GET', '/auth/forward-authx'],
      ['GET', '/auth/forward-auth-x/y'],
    ] as const) {
      const outside = await k.keygate.handle(
        new Request(`http://localhost${path}`, { method, headers: k.basic(key.key, key.secret) }),
      );
      expect([path, outside.status]).toEqual([path, 404]);
    }
  });
});

describe('headers on every response', () => {
  it('sets nosniff and a request id, keeps a sane client id, and names no framework', async () => {
    const k = await testKeygate();
    const key = await k.createKey(1);
    for (const response of [
      await k.req('GET', '/health'),
      await k.req('GET', '/missing'),
      await k.req('POST', '/apikeys/jwt', { body: {} }),
      // The verification routes, which the edge answers itself: allowed, refused, bad input.
      await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } }),
      await k.req('POST', '/apikeys/verify', { body: { key: key.key } }),
      await k.req('GET', '/forward-auth', { headers: k.basic(key.key, key.secret) }),
      await k.req('GET', '/forward-auth/x', { headers: k.basic(key.key, 'wrong') }),
      await k.req('GET', '/forward-auth'),
      await k.req('GET', '/forward-auth?minLevel=x', { headers: k.basic(key.key, key.secret) }),
    ]) {
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      expect(response.headers.get('x-powered-by')).toBeNull();
      expect(response.headers.get('server')).toBeNull();
    }
    for (const path of ['/health', '/forward-auth']) {
      const echoed = await k.req('GET', path, { headers: { 'x-request-id': 'trace-123' } });
      expect(echoed.headers.get('x-request-id')).toBe('trace-123');
    }
    const replaced = await k.req('GET', '/health', { headers: { 'x-request-id': 'bad id\u0001' } });
    // A refused id is replaced by a fresh UUID (a random UUID may well contain "bad": assert its form).
    expect(replaced.headers.get('x-request-id')).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
  });
});

describe('request logs', () => {
  it('write one JSON line per request with id, method, path, status and ms, and never a credential', async () => {
    const lines: string[] = [];
    const logger = createLogger('info', (chunk) => lines.push(...chunk.trimEnd().split('\n')));
    const config = loadConfig({ DATABASE_URL: ':memory:', JWT_SECRET });
    const keygate = await createKeygate(config, { jwtSecret: JWT_SECRET, logger });
    const token = await keygate.jwt.sign({ sub: 1, ttlSeconds: 60 });
    const created = await keygate.handle(
      new Request('http://localhost/apikeys/jwt?token=leak', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'logged', level: 1, expiresIn: 60 }),
      }),
    );
    const { apikey } = (await created.json()) as { apikey: { key: string; secret: string } };
    const basic = `Basic ${Buffer.from(`${apikey.key}:${apikey.secret}`).toString('base64')}`;
    await keygate.handle(
      new Request(`http://localhost/apikeys/${apikey.key}/key`, {
        method: 'DELETE',
        headers: { authorization: basic },
      }),
    );
    logger.flush();
    // Beside each request line, the change's audit line.
    expect(lines.map((line) => JSON.parse(line).msg)).toEqual([
      'apikey.created',
      'request',
      'apikey.deleted',
      'request',
    ]);
    const requests = lines.filter((line) => JSON.parse(line).msg === 'request');
    const first = JSON.parse(requests[0] as string);
    expect(first).toMatchObject({
      level: 'info',
      msg: 'request',
      method: 'POST',
      path: '/apikeys/jwt',
      status: 201,
    });
    expect(typeof first.requestId).toBe('string');
    expect(typeof first.ms).toBe('number');
    expect(JSON.parse(requests[1] as string)).toMatchObject({ method: 'DELETE', status: 204 });
    const all = lines.join('\n');
    for (const credential of [token, apikey.secret, basic, 'leak', 'authorization', 'Bearer']) {
      expect(all).not.toContain(credential);
    }
  });

  it('write the request line as JSON.stringify would, fields in order, at info and at debug', async () => {
    for (const level of ['info', 'debug'] as const) {
      const lines: string[] = [];
      const logger = createLogger(level, (chunk) => lines.push(...chunk.trimEnd().split('\n')));
      const config = loadConfig({ DATABASE_URL: ':memory:', JWT_SECRET, LOG_LEVEL: level });
      const keygate = await createKeygate(config, { jwtSecret: JWT_SECRET, logger });
      await keygate.handle(new Request('http://localhost/n%C3%B6pe/%22quoted%22?q="x"'));
      await keygate.handle(
        new Request('http://localhost/apikeys/verify', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-request-id': 'given.id-1' },
          body: JSON.stringify({ token: 'not.a.token' }),
        }),
      );
      // A client id that JSON would have to escape is not taken: the line carries a UUID instead.
      await keygate.handle(new Request('http://localhost/health', { headers: { 'x-request-id': 'a"b\\c' } }));
      logger.flush();
      await keygate.close();
      const requests = lines.map((line) => JSON.parse(line)).filter((line) => line.msg === 'request');
      const fields = ['time', 'level', 'msg', 'requestId', 'method', 'path', 'status', 'ms'];
      expect(requests.map((line) => Object.keys(line))).toEqual([
        fields,
        level === 'debug' ? [...fields, 'tokenRefusal'] : fields,
        fields,
      ]);
      expect(requests[0]).toMatchObject({ path: '/n%C3%B6pe/%22quoted%22', status: 404 });
      expect(requests[1]).toMatchObject({ requestId: 'given.id-1', path: '/apikeys/verify', status: 200 });
      expect(requests[2].requestId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      for (const line of lines) expect(line).toBe(JSON.stringify(JSON.parse(line)));
    }
  });
});

/** A keygate on an in-memory database whose error lines are kept in `lines` (`logger.flush()` writes them). */
async function keygateKeepingErrors(settings: Record<string, string> = {}) {
  const lines: string[] = [];
  const logger = createLogger('error', (chunk) => lines.push(chunk));
  const config = loadConfig({ DATABASE_URL: ':memory:', JWT_SECRET, ...settings });
  const keygate = await createKeygate(config, { jwtSecret: JWT_SECRET, logger });
  return { keygate, lines, logger };
}

describe('unexpected errors', () => {
  it('answer 500 with a generic sentence and the request id, and log the stack', async () => {
    const { keygate, lines, logger } = await keygateKeepingErrors();
    keygate.store.findKey = () => {
      throw new Error('kaboom in the store');
    };
    const token = await keygate.jwt.sign({ sub: 1, ttlSeconds: 60 });
    const response = await keygate.handle(
      new Request('http://localhost/apikeys/kg_0000000000000000000000/jwt', {
        method: 'DELETE',
        headers: { authorization: `Bearer ${token}` },
      }),
    );
    expect(response.status).toBe(500);
    const body = (await response.json()) as { result: string; error: string };
    expect(body.result).toBe('error');
    expect(body.error).not.toContain('kaboom');
    expect(body.error).toContain(response.headers.get('x-request-id') as string);
    logger.flush();
    expect(lines.join('')).toContain('kaboom in the store');
  });
});

describe('a key read that fails at once (SQLite reads synchronously)', () => {
  const KEY = 'kg_0000000000000000000000';
  const basic = `Basic ${Buffer.from(`${KEY}:secret`).toString('base64')}`;
  const requests: Array<[string, () => Request]> = [
    [
      'verify',
      () =>
        new Request('http://localhost/apikeys/verify', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ key: KEY, secret: 'secret' }),
        }),
    ],
    [
      'forward-auth',
      () => new Request('http://localhost/forward-auth', { headers: { authorization: basic } }),
    ],
    [
      'create via key',
      () =>
        new Request('http://localhost/apikeys/key', {
          method: 'POST',
          headers: { authorization: basic, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'x', level: 1, expiresIn: 60 }),
        }),
    ],
  ];

  it.each(requests)(
    '%s: 503 with Retry-After when the database is unavailable, 500 for anything else',
    async (_, request) => {
      const { keygate, lines, logger } = await keygateKeepingErrors({ KEY_CACHE_SECONDS: '0' });
      try {
        keygate.store.findKey = () => {
          throw new StoreUnavailableError('SQLITE_BUSY');
        };
        const unavailable = await keygate.handle(request());
        expect(unavailable.status).toBe(503);
        expect(unavailable.headers.get('retry-after')).not.toBeNull();
        expect(((await unavailable.json()) as { result: string }).result).toBe('error');
        keygate.store.findKey = () => {
          throw new Error('kaboom in the store');
        };
        const failed = await keygate.handle(request());
        expect(failed.status).toBe(500);
        const body = (await failed.json()) as { result: string; error: string };
        expect(body).toEqual({
          result: 'error',
          error: expect.stringContaining(failed.headers.get('x-request-id') as string),
        });
        logger.flush();
        expect(lines.join('')).toContain('kaboom in the store');
      } finally {
        await keygate.close();
      }
    },
  );
});

describe('short Host headers', () => {
  it.each(['x', 'ab', 'abc', 'x:1'])('route correctly with Host %s', async (host) => {
    const k = await testKeygate();
    const headers = { ...(await k.bearer(1)), 'content-type': 'application/json' };
    const body = JSON.stringify({ name: 'short-host', level: 1, expiresIn: 60 });
    const response = await k.keygate.handle(
      new Request(`http://${host}/apikeys/jwt`, { method: 'POST', headers, body }),
    );
    expect(response.status).toBe(201);
    expect((await k.keygate.handle(new Request(`http://${host}/health`))).status).toBe(200);
  });
});

describe('the root', () => {
  it('answers 404 pointing to the API reference', async () => {
    const k = await testKeygate();
    const response = await k.req('GET', '/');
    expect(response.status).toBe(404);
    expect(response.json).toEqual({
      result: 'error',
      error: 'There is no GET /. The API reference is at /openapi.',
    });
    await k.close();
  });
});
