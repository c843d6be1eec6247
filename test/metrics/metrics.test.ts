// Metrics (docs/metrics.md): what is counted, by which labels, that no key, user or address becomes a
// label, that they cost nothing when off, and the second listener over a real socket.

import { afterEach, describe, expect, it } from 'bun:test';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { createMetrics } from '../../src/metrics/metrics';
import { type RunningServer, serve } from '../../src/serve';
import { JWT_SECRET, type TestKeygate, testKeygate } from '../support/keygate';
import { sqliteOf } from '../support/raw-query';

type Sample = { name: string; labels: Record<string, string>; value: number };

/** The samples of a Prometheus text exposition (no escaped quotes occur in keygate's labels). */
function parseExposition(text: string): Sample[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!match) throw new Error(`not an exposition line: ${line}`);
      const labels: Record<string, string> = {};
      for (const [, key, value] of (match[2] ?? '').matchAll(/([a-zA-Z_]+)="([^"]*)"/g)) {
        labels[key as string] = value as string;
      }
      return { name: match[1] as string, labels, value: Number(match[3]) };
    });
}

/** The value of the one sample with this name and (at least) these labels; undefined if none. */
function sampleValue(
  samples: Sample[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const found = samples.filter(
    (sample) =>
      sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value;
}

async function scrape(k: TestKeygate): Promise<Sample[]> {
  const metrics = k.keygate.metrics;
  if (!metrics) throw new Error('metrics are off');
  return parseExposition(await metrics.exposition());
}

describe('metrics through the API', () => {
  it('are off, and nothing is counted, while METRICS_PORT is unset', async () => {
    expect((await testKeygate()).keygate.metrics).toBeUndefined();
  });

  it('count requests by method, route template and status, with a latency histogram', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    const key = await k.createKey(42);
    await k.req('DELETE', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(42) });
    await k.req('DELETE', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(42) });
    await k.req('POST', '/apikeys/jwt', { body: { name: 'x', level: 1, expiresIn: 60 } });
    await k.req('GET', '/health');
    const samples = await scrape(k);
    const requests = (method: string, route: string, status: string) =>
      sampleValue(samples, 'keygate_http_requests_total', { method, route, status });
    expect(requests('POST', '/apikeys/jwt', '201')).toBe(1);
    expect(requests('DELETE', '/apikeys/:id/jwt', '204')).toBe(1);
    expect(requests('DELETE', '/apikeys/:id/jwt', '404')).toBe(1);
    expect(requests('POST', '/apikeys/jwt', '401')).toBe(1);
    expect(requests('GET', '/health', '200')).toBe(1);
    const histogram = { method: 'DELETE', route: '/apikeys/:id/jwt', status: '204' };
    expect(sampleValue(samples, 'keygate_http_request_duration_seconds_count', histogram)).toBe(1);
    expect(
      sampleValue(samples, 'keygate_http_request_duration_seconds_bucket', { ...histogram, le: '+Inf' }),
    ).toBe(1);
    expect(
      sampleValue(samples, 'keygate_http_request_duration_seconds_sum', histogram),
    ).toBeGreaterThanOrEqual(0);
  });

  it('label failures before the handler (auth, body) with the route they were meant for', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    await k.req('POST', '/apikeys/key', { headers: k.basic('kg_000000000000000000000000', 'x'), body: '{' });
    await k.req('POST', '/apikeys/jwt', { headers: await k.bearer(1), body: '{not json' });
    await k.req('DELETE', '/apikeys/kg_nope/key');
    const samples = await scrape(k);
    expect(
      sampleValue(samples, 'keygate_http_requests_total', { route: '/apikeys/key', status: '403' }),
    ).toBe(1);
    expect(
      sampleValue(samples, 'keygate_http_requests_total', { route: '/apikeys/jwt', status: '400' }),
    ).toBe(1);
    expect(
      sampleValue(samples, 'keygate_http_requests_total', { route: '/apikeys/:id/key', status: '401' }),
    ).toBe(1);
  });

  it('put unknown paths and bodies refused before routing under one fixed label', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    for (const path of ['/nope', '/a/b/c', `/${'x'.repeat(200)}`]) await k.req('GET', path);
    await k.req('POST', '/apikeys/jwt', {
      headers: { ...(await k.bearer(1)), 'content-length': String(64 * 1024) },
      body: 'x'.repeat(64 * 1024),
    });
    const samples = await scrape(k);
    expect(
      sampleValue(samples, 'keygate_http_requests_total', {
        method: 'GET',
        route: 'unmatched',
        status: '404',
      }),
    ).toBe(3);
    expect(
      sampleValue(samples, 'keygate_http_requests_total', {
        method: 'POST',
        route: 'unmatched',
        status: '413',
      }),
    ).toBe(1);
  });

  it('count keys created and revoked, and commits with their batch sizes', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    const before = await scrape(k);
    expect(sampleValue(before, 'keygate_keys_created_total')).toBe(0);
    expect(sampleValue(before, 'keygate_keys_deleted_total', { reason: 'revoked' })).toBe(0);
    expect(sampleValue(before, 'keygate_keys_deleted_total', { reason: 'expired' })).toBe(0);
    const keys = await Promise.all([k.createKey(7), k.createKey(7), k.createKey(7)]);
    const own = keys[0] as (typeof keys)[number];
    await k.req('DELETE', `/apikeys/${own.key}/key`, { headers: k.basic(own.key, own.secret) });
    await k.req('POST', '/apikeys/jwt', {
      headers: await k.bearer(7, 1),
      body: { name: 'x', level: 5, expiresIn: 9 },
    });
    const after = await scrape(k);
    expect(sampleValue(after, 'keygate_keys_created_total')).toBe(3);
    expect(sampleValue(after, 'keygate_keys_deleted_total', { reason: 'revoked' })).toBe(1);
    // Four writes, in as many commits as the event loop grouped them into (test/db/group-commit.test.ts
    // shows the grouping itself): one duration per commit, and the sizes add up to the writes.
    const commits = sampleValue(after, 'keygate_db_commit_batch_size_count') as number;
    expect(commits).toBeGreaterThanOrEqual(2); // the delete came after the creates had committed
    expect(commits).toBeLessThanOrEqual(4);
    expect(sampleValue(after, 'keygate_db_commit_batch_size_sum')).toBe(4);
    expect(sampleValue(after, 'keygate_db_commit_duration_seconds_count')).toBe(commits);
    expect(sampleValue(after, 'keygate_db_commit_failures_total')).toBe(0);
  });

  it('count verify outcomes by scheme and code', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    const key = await k.createKey(5, { level: 3 });
    const verify = (body: unknown) => k.req('POST', '/apikeys/verify', { body });
    await verify({ key: key.key, secret: key.secret });
    await verify({ key: key.key, secret: key.secret, minLevel: 5 });
    await verify({ key: key.key, secret: 'wrong' });
    await verify({ token: 'not.a.token' });
    await verify({ token: await k.token(5) });
    await verify({ key: key.key }); // 400: not an outcome
    const samples = await scrape(k);
    const outcome = (scheme: string, code: string) =>
      sampleValue(samples, 'keygate_verifications_total', { path: 'verify', scheme, code });
    expect(outcome('key', 'VALID')).toBe(1);
    expect(outcome('key', 'INSUFFICIENT_LEVEL')).toBe(1);
    expect(outcome('key', 'NOT_FOUND')).toBe(1);
    expect(outcome('jwt', 'INVALID_TOKEN')).toBe(1);
    expect(outcome('jwt', 'VALID')).toBe(1);
    const total = samples
      .filter((sample) => sample.name === 'keygate_verifications_total')
      .reduce((sum, sample) => sum + sample.value, 0);
    expect(total).toBe(5);
  });

  it('count forward-auth outcomes, including refusals before a verdict', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    const key = await k.createKey(6, { level: 2 });
    await k.req('GET', '/forward-auth');
    await k.req('GET', '/forward-auth/app', { headers: k.basic(key.key, key.secret) });
    await k.req('GET', '/forward-auth?minLevel=4', { headers: k.basic(key.key, key.secret) });
    await k.req('GET', '/forward-auth', { headers: { authorization: 'Bearer' } });
    await k.req('GET', '/forward-auth', { headers: await k.bearer(6) });
    await k.req('GET', '/forward-auth?minLevel=x', { headers: await k.bearer(6) }); // 400: not counted
    const samples = await scrape(k);
    const outcome = (scheme: string, code: string) =>
      sampleValue(samples, 'keygate_verifications_total', { path: 'forward_auth', scheme, code });
    expect(outcome('none', 'NO_CREDENTIALS')).toBe(1);
    expect(outcome('key', 'VALID')).toBe(1);
    expect(outcome('key', 'INSUFFICIENT_LEVEL')).toBe(1);
    expect(outcome('jwt', 'MALFORMED')).toBe(1);
    expect(outcome('jwt', 'VALID')).toBe(1);
    expect(
      sampleValue(samples, 'keygate_http_requests_total', { route: '/forward-auth/*', status: '200' }),
    ).toBe(1);
  });

  it('count the codes of rate limits and credits, on verify and on forward-auth', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    const created = await k.req('POST', '/apikeys/jwt', {
      headers: await k.bearer(9),
      body: {
        name: 'x',
        level: 1,
        expiresIn: 60,
        ratelimit: { limit: 2, duration: 60 },
        credits: { remaining: 1 },
      },
    });
    const key = created.json.apikey as { key: string; secret: string };
    const body = { key: key.key, secret: key.secret };
    await k.req('POST', '/apikeys/verify', { body }); // VALID: the one credit
    await k.req('POST', '/apikeys/verify', { body }); // USAGE_EXCEEDED: the limit given back
    await k.req('GET', '/forward-auth', { headers: k.basic(key.key, key.secret) }); // USAGE_EXCEEDED
    await k.req('POST', '/apikeys/verify', { body: { ...body, cost: 0 } }); // VALID: the second of two
    await k.req('GET', '/forward-auth', { headers: k.basic(key.key, key.secret) }); // RATE_LIMITED
    const samples = await scrape(k);
    const outcome = (path: string, code: string) =>
      sampleValue(samples, 'keygate_verifications_total', { path, scheme: 'key', code });
    expect(outcome('verify', 'VALID')).toBe(2);
    expect(outcome('verify', 'USAGE_EXCEEDED')).toBe(1);
    expect(outcome('forward_auth', 'USAGE_EXCEEDED')).toBe(1);
    expect(outcome('forward_auth', 'RATE_LIMITED')).toBe(1);
    expect(
      sampleValue(samples, 'keygate_http_requests_total', { route: '/forward-auth', status: '429' }),
    ).toBe(2);
  });

  it('count every key an operator’s revoke-all removed as revoked', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    for (let i = 0; i < 3; i++) await k.createKey(12);
    const revoked = await k.req('DELETE', '/admin/users/12/apikeys', { headers: await k.operator('ops') });
    expect(revoked.json).toEqual({ result: 'success', deleted: 3 });
    expect(sampleValue(await scrape(k), 'keygate_keys_deleted_total', { reason: 'revoked' })).toBe(3);
  });

  it('count the operator’s creates and deletes as the owner’s (docs/metrics.md says so)', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    const headers = await k.operator('ops');
    const created = await k.req('POST', '/admin/users/12/apikeys', {
      headers,
      body: { name: 'support', level: 2, expiresIn: 3600 },
    });
    expect(created.status).toBe(201);
    const deleted = await k.req('DELETE', `/admin/apikeys/${created.json.apikey.key}`, { headers });
    expect(deleted.status).toBe(204);
    const samples = await scrape(k);
    expect(sampleValue(samples, 'keygate_keys_created_total', {})).toBe(1);
    expect(sampleValue(samples, 'keygate_keys_deleted_total', { reason: 'revoked' })).toBe(1);
  });

  it('count rotations, and key-cache hits and misses', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    const key = await k.createKey(8, { level: 1 });
    const rotated = await k.req('POST', `/apikeys/${key.key}/rotate/jwt`, { headers: await k.bearer(8) });
    expect(rotated.status).toBe(201);
    const fresh = rotated.json.apikey as { key: string; secret: string };
    await k.req('POST', '/apikeys/verify', { body: { key: fresh.key, secret: fresh.secret } });
    await k.req('POST', '/apikeys/verify', { body: { key: fresh.key, secret: fresh.secret } });
    const samples = await scrape(k);
    expect(sampleValue(samples, 'keygate_keys_rotated_total')).toBe(1);
    expect(sampleValue(samples, 'keygate_keys_created_total')).toBe(1); // the rotation is counted as such
    const lookups = (result: string) =>
      sampleValue(samples, 'keygate_cache_lookups_total', { cache: 'key', result });
    expect(lookups('miss')).toBeGreaterThanOrEqual(1);
    expect(lookups('hit')).toBeGreaterThanOrEqual(1);
  });

  it('never carry a key, a user id, a secret or a token in a label', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    const key = await k.createKey(987654321);
    await k.req('DELETE', `/apikeys/${key.key}/key`, { headers: k.basic(key.key, key.secret) });
    await k.req('DELETE', '/apikeys/kg_AAAAAAAAAAAAAAAAAAAAAAAA/jwt', { headers: await k.bearer(987654321) });
    const text = await (k.keygate.metrics?.exposition() ?? '');
    for (const secretish of [key.key, key.secret, '987654321', 'kg_AAAA', 'Bearer']) {
      expect(text).not.toContain(secretish);
    }
    const labelNames = new Set(parseExposition(text).flatMap((sample) => Object.keys(sample.labels)));
    expect([...labelNames].sort()).toEqual([
      'cache',
      'engine',
      'le',
      'method',
      'reason',
      'result',
      'route',
      'status',
      'version',
    ]);
  });

  it('leave BASE_PATH out of the route label', async () => {
    const k = await testKeygate({ METRICS_PORT: '0', BASE_PATH: '/auth' });
    await k.req('GET', '/health');
    const samples = await scrape(k);
    expect(sampleValue(samples, 'keygate_http_requests_total', { route: '/health', status: '200' })).toBe(1);
  });

  it('say whether the database answers at each scrape, and which build answers', async () => {
    const k = await testKeygate({ METRICS_PORT: '0' });
    const up = await scrape(k);
    expect(sampleValue(up, 'keygate_db_up')).toBe(1);
    expect(sampleValue(up, 'keygate_build_info', { engine: 'sqlite' })).toBe(1);
    expect(up.find((sample) => sample.name === 'keygate_build_info')?.labels.version).toMatch(
      /^\d+\.\d+\.\d+/,
    );
    sqliteOf(k.keygate)?.close();
    expect(sampleValue(await scrape(k), 'keygate_db_up')).toBe(0);
  });
});

describe('metric recording functions', () => {
  const fresh = () => createMetrics({ version: '1.2.3', engine: 'sqlite', databaseUp: () => true });

  it('say whether the last write committed: 1 at first, 0 after a refused write, 1 after the next commit', async () => {
    const metrics = fresh();
    const writable = async () =>
      sampleValue(parseExposition(await metrics.exposition()), 'keygate_db_writable');
    expect(await writable()).toBe(1);
    metrics.commitObserved({ size: 3, seconds: 0.001, committed: false });
    expect(await writable()).toBe(0);
    metrics.commitObserved({ size: 1, seconds: 0.001, committed: true });
    expect(await writable()).toBe(1);
    metrics.writeObserved(false);
    expect(await writable()).toBe(0);
    metrics.writeObserved(true);
    expect(await writable()).toBe(1);
  });

  it('count expired keys removed by the purge, batch by batch', async () => {
    const metrics = fresh();
    const batches = [100, 37, 0];
    const store = metrics.countingPurges({ deleteExpiredBatch: async () => batches.shift() ?? 0 });
    expect([await store.deleteExpiredBatch(0, 100), await store.deleteExpiredBatch(0, 100)]).toEqual([
      100, 37,
    ]);
    await store.deleteExpiredBatch(0, 100);
    const samples = parseExposition(await metrics.exposition());
    expect(sampleValue(samples, 'keygate_keys_deleted_total', { reason: 'expired' })).toBe(137);
  });

  it('count verification outcomes by path, scheme and code, rotations, and cache lookups', async () => {
    const metrics = fresh();
    metrics.verification('verify', 'key', 'VALID');
    metrics.verification('verify', 'key', 'VALID');
    metrics.verification('forward_auth', 'jwt', 'INVALID_TOKEN');
    // A rotation is counted where it is committed, once; a refused one tells no event.
    metrics.keyEvents.rotated({
      key: 'kg_new',
      previousKey: 'kg_old',
      userId: 1,
      by: 'jwt:1',
      requestId: 'r',
    });
    metrics.observeRequest('POST', '/apikeys/:id/rotate/key', 409, 0.001);
    metrics.cacheLookup('verified_token', true);
    metrics.cacheLookup('verified_token', false);
    metrics.cacheLookup('verified_token', true);
    metrics.commitObserved({ size: 3, seconds: 0.002, committed: false });
    const samples = parseExposition(await metrics.exposition());
    const verifications = (labels: Record<string, string>) =>
      sampleValue(samples, 'keygate_verifications_total', labels);
    expect(verifications({ path: 'verify', scheme: 'key', code: 'VALID' })).toBe(2);
    expect(verifications({ path: 'forward_auth', scheme: 'jwt', code: 'INVALID_TOKEN' })).toBe(1);
    expect(sampleValue(samples, 'keygate_keys_rotated_total')).toBe(1);
    expect(
      sampleValue(samples, 'keygate_cache_lookups_total', { cache: 'verified_token', result: 'hit' }),
    ).toBe(2);
    expect(
      sampleValue(samples, 'keygate_cache_lookups_total', { cache: 'verified_token', result: 'miss' }),
    ).toBe(1);
    expect(sampleValue(samples, 'keygate_db_commit_failures_total')).toBe(1);
  });

  it('count a method no client should send as "other"', async () => {
    const metrics = fresh();
    metrics.observeRequest('FROBNICATE', 'unmatched', 404, 0.001);
    metrics.observeRequest('get', 'unmatched', 404, 0.001);
    const samples = parseExposition(await metrics.exposition());
    expect(sampleValue(samples, 'keygate_http_requests_total', { method: 'other' })).toBe(2);
    expect(samples.some((sample) => sample.labels.method === 'FROBNICATE')).toBe(false);
  });

  it('wait for a database ping that answers later, and treat one that rejects as down', async () => {
    const later = createMetrics({ version: '1', engine: 'sqlite', databaseUp: async () => true });
    expect(sampleValue(parseExposition(await later.exposition()), 'keygate_db_up')).toBe(1);
    const failing = createMetrics({
      version: '1',
      engine: 'sqlite',
      databaseUp: () => Promise.reject(new Error('down')),
    });
    expect(sampleValue(parseExposition(await failing.exposition()), 'keygate_db_up')).toBe(0);
  });

  it('treat a database ping that throws as down', async () => {
    const metrics = createMetrics({
      version: '1.2.3',
      engine: 'sqlite',
      databaseUp: () => {
        throw new Error('closed');
      },
    });
    expect(sampleValue(parseExposition(await metrics.exposition()), 'keygate_db_up')).toBe(0);
  });
});

describe('the metrics listener (real sockets)', () => {
  let server: RunningServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  async function start(env: Record<string, string> = {}) {
    const config = loadConfig({
      DATABASE_URL: ':memory:',
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
      JWT_SECRET,
      ...env,
    });
    server = await serve(config, { jwtSecret: JWT_SECRET, logger: createLogger('silent') });
    return server;
  }

  it('serves GET /metrics on its own port, in the Prometheus text format', async () => {
    const { url, metricsUrl } = await start();
    expect(metricsUrl?.hostname).toBe('127.0.0.1');
    expect(metricsUrl?.port).not.toBe(url.port);
    expect((await fetch(new URL('health', url))).status).toBe(200);
    const response = await fetch(metricsUrl as URL);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toStartWith('text/plain; version=0.0.4');
    const samples = parseExposition(await response.text());
    expect(
      sampleValue(samples, 'keygate_http_requests_total', { method: 'GET', route: '/health', status: '200' }),
    ).toBe(1);
    expect(sampleValue(samples, 'keygate_db_up')).toBe(1);
  });

  it('answers other paths and methods there with the JSON error shape, and /metrics is not on the API port', async () => {
    const { url, metricsUrl } = await start();
    const other = await fetch(new URL('/other', metricsUrl));
    expect(other.status).toBe(404);
    expect(other.headers.get('content-type')).toBe('application/json');
    expect(await other.json()).toEqual({ result: 'error', error: expect.any(String) });
    const post = await fetch(metricsUrl as URL, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(await post.json()).toEqual({ result: 'error', error: 'Only GET /metrics is served here.' });
    expect((await fetch(new URL('/metrics', url))).status).toBe(404);
  });

  it('does not open when METRICS_PORT is unset', async () => {
    const config = loadConfig({ DATABASE_URL: ':memory:', HOST: '127.0.0.1', PORT: '0', JWT_SECRET });
    server = await serve(config, { jwtSecret: JWT_SECRET, logger: createLogger('silent') });
    expect(server.metricsUrl).toBeUndefined();
  });

  it('refuses to start when the metrics port is taken, leaving the API port closed', async () => {
    const taken = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
    try {
      await expect(start({ METRICS_PORT: String(taken.port) })).rejects.toThrow();
      server = undefined;
    } finally {
      taken.stop(true);
    }
  });
});

describe('keygate serve with a bad METRICS_PORT', () => {
  it.each([['nine'], ['70000']])('METRICS_PORT=%s exits 2 with one line', (value) => {
    const result = Bun.spawnSync(['bun', 'run', `${import.meta.dir}/../../src/cli.ts`, 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: ':memory:',
        JWT_SECRET,
        HOST: '127.0.0.1',
        PORT: '0',
        METRICS_PORT: value,
      },
      stderr: 'pipe',
      stdout: 'pipe',
      timeout: 5000,
    });
    expect(result.exitCode).toBe(2);
    expect(result.stderr.toString()).toBe(
      `keygate: METRICS_PORT must be an integer from 0 to 65535 (got "${value}").\n`,
    );
  });
});
