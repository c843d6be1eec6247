// Forward-auth's permissions and route rules, and where keys may be used from: the AND of
// the query's permissions, X-Keygate-Permissions and the matching rule; requirements read before the
// credential (a bad one is 400 whatever the credential); rules matched on the proxied method and
// normalised path (first match wins, query not part of the path); allow anyone; FORWARD_AUTH_DEFAULT;
// SIGHUP's reload keeping the old rules when the new file is bad; the client's address behind
// TRUSTED_PROXIES; and the /key routes refusing a key from outside its allowedIps. Both engines.
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestKeygate, testKeygate } from '../support/keygate';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-rules-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const RULES = [
  { path: '/public/*', allow: 'anyone' },
  { methods: ['GET', 'HEAD'], path: '/documents/*', permissions: 'documents.read' },
  { methods: ['POST', 'PUT', 'PATCH', 'DELETE'], path: '/documents/*', permissions: 'documents.write' },
  { path: '/admin/*', permissions: 'admin', minLevel: 6 },
  { path: '/billing', permissions: 'billing.read OR admin' },
  { path: '/billing', permissions: 'never.reached' },
];

function rulesFile(name: string, rules: unknown): string {
  const path = join(scratch, name);
  writeFileSync(path, typeof rules === 'string' ? rules : JSON.stringify(rules));
  return path;
}

let k: TestKeygate;
let rulesPath: string;
let reader: { key: string; secret: string };
let writer: { key: string; secret: string };
let admin: { key: string; secret: string };
beforeAll(async () => {
  rulesPath = rulesFile('rules.json', RULES);
  k = await testKeygate({ FORWARD_AUTH_RULES_FILE: rulesPath, TRUSTED_PROXIES: '10.0.0.0/8, ::1' });
  reader = await k.createKey(50, { level: 3, permissions: ['documents.read', 'billing.read'] });
  writer = await k.createKey(50, { level: 3, permissions: ['documents.*'] });
  admin = await k.createKey(50, { level: 7, permissions: ['admin'] });
});
afterAll(() => k.close());

/** A forward-auth request as nginx sends it (X-Original-Method, X-Original-URI). */
const viaNginx = (
  key: { key: string; secret: string } | undefined,
  method: string,
  uri: string,
  extra: Record<string, string> = {},
  query = '',
) =>
  k.req('GET', `/forward-auth${query}`, {
    headers: {
      ...(key ? k.basic(key.key, key.secret) : {}),
      'x-original-method': method,
      'x-original-uri': uri,
      ...extra,
    },
  });

describe('route rules', () => {
  it.each([
    ['GET', '/documents/42', 'reader', 200],
    ['GET', '/documents', 'reader', 200],
    ['HEAD', '/documents/', 'reader', 200],
    ['POST', '/documents/42', 'reader', 403],
    ['POST', '/documents/42', 'writer', 200],
    ['DELETE', '/documents/a/b', 'writer', 200],
    ['GET', '/documentsx', 'reader', 200],
    ['GET', '/admin/x', 'reader', 403],
    ['GET', '/admin/x', 'admin', 200],
    ['GET', '/billing', 'reader', 200],
    ['GET', '/billing', 'writer', 403],
    ['GET', '/billing?x=1', 'reader', 200],
    ['GET', '/public/../admin/x', 'reader', 403],
    ['GET', '/public/%2e%2e/documents/1', 'reader', 200],
  ])('%s %s as the %s key: %i', async (method, uri, who, status) => {
    const key = { reader, writer, admin }[who as 'reader' | 'writer' | 'admin'];
    const response = await viaNginx(key, method, uri);
    expect(response.status).toBe(status);
    // The admin rule also wants level 6, which the reader's level 3 fails first.
    const code = uri.includes('admin') ? 'INSUFFICIENT_LEVEL' : 'INSUFFICIENT_PERMISSIONS';
    if (status === 403) expect(response.headers.get('x-keygate-code')).toBe(code);
  });

  it('applies the first rule that matches: the later /billing rule is never reached', async () => {
    expect((await viaNginx(reader, 'GET', '/billing')).status).toBe(200);
  });

  it("adds the rule's minLevel: the admin rule wants level 6", async () => {
    const low = await k.createKey(50, { level: 5, permissions: ['admin'] });
    const response = await viaNginx(low, 'GET', '/admin/panel');
    expect(response.status).toBe(403);
    expect(response.headers.get('x-keygate-code')).toBe('INSUFFICIENT_LEVEL');
  });

  it('lets anyone through a rule that allows anyone: 200 without identity headers, no credential needed', async () => {
    for (const key of [undefined, { key: 'kg_nope', secret: 'nope' }]) {
      const response = await viaNginx(key, 'GET', '/public/logo.png');
      expect(response.status).toBe(200);
      expect(response.json).toEqual({ result: 'success' });
      expect(response.headers.has('x-keygate-user-id')).toBe(false);
    }
  });

  it('reads the proxied request from each proxy: Traefik and Caddy, nginx, and the Envoy suffix', async () => {
    const basic = k.basic(reader.key, reader.secret);
    const traefik = await k.req('GET', '/forward-auth', {
      headers: { ...basic, 'x-forwarded-method': 'POST', 'x-forwarded-uri': '/documents/1' },
    });
    expect(traefik.status).toBe(403);
    const envoy = await k.req('POST', '/forward-auth/documents/1?draft=1', { headers: basic });
    expect(envoy.status).toBe(403);
    const envoyRead = await k.req('GET', '/forward-auth/documents/1', { headers: basic });
    expect(envoyRead.status).toBe(200);
  });

  it.each(['/a/../../x', '/a%2Fb', '/a\\b', '/a%00b'])(
    'refuses the proxied path %s with a 400, whatever the credential',
    async (uri) => {
      for (const key of [reader, undefined]) {
        const response = await viaNginx(key, 'GET', uri);
        expect(response.status).toBe(400);
        expect(response.json.result).toBe('error');
      }
    },
  );

  it('falls back to FORWARD_AUTH_DEFAULT=credential when no rule matches: any valid credential', async () => {
    const plain = await k.createKey(50, { level: 0 });
    expect((await viaNginx(plain, 'GET', '/elsewhere')).status).toBe(200);
    expect((await viaNginx(undefined, 'GET', '/elsewhere')).status).toBe(401);
  });
});

describe('permissions asked by the proxy and the client', () => {
  it('requires the AND of every permissions parameter, the header and the rule', async () => {
    const asked = (query: string, header?: string) =>
      viaNginx(
        writer,
        'GET',
        '/elsewhere',
        header === undefined ? {} : { 'x-keygate-permissions': header },
        query,
      );
    expect((await asked('?permissions=documents.read')).status).toBe(200);
    expect((await asked('?permissions=documents.read&permissions=admin')).status).toBe(403);
    expect((await asked('?permissions=documents.read', 'admin')).status).toBe(403);
    expect((await asked('', 'documents.read OR admin')).status).toBe(200);
    expect((await asked('', '')).status).toBe(200);
    const byRule = await viaNginx(reader, 'GET', '/documents/1', {}, '?permissions=admin');
    expect(byRule.status).toBe(403);
  });

  it('answers X-Keygate-Permissions with what the credential holds', async () => {
    const response = await viaNginx(writer, 'GET', '/documents/1');
    expect(response.headers.get('x-keygate-permissions')).toBe('documents.*');
    const token = await k.token(51, { scope: 'documents.read openid' });
    const byToken = await k.req('GET', '/forward-auth', { headers: { authorization: `Bearer ${token}` } });
    expect(byToken.headers.get('x-keygate-permissions')).toBe('documents.read openid');
    const plain = await k.createKey(50, { level: 0 });
    expect((await viaNginx(plain, 'GET', '/x')).headers.has('x-keygate-permissions')).toBe(false);
  });

  it('refuses a malformed query in either place with a 400 before looking at the credential', async () => {
    for (const key of [reader, undefined]) {
      expect((await viaNginx(key, 'GET', '/x', {}, '?permissions=a%20AND')).status).toBe(400);
      expect((await viaNginx(key, 'GET', '/x', { 'x-keygate-permissions': 'documents.*' })).status).toBe(400);
    }
  });

  it('checks a token the same way: INSUFFICIENT_PERMISSIONS, 403', async () => {
    const token = await k.token(52, { scope: 'documents.read' });
    const response = await k.req('GET', '/forward-auth?permissions=documents.write', {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.status).toBe(403);
    expect(response.headers.get('x-keygate-code')).toBe('INSUFFICIENT_PERMISSIONS');
  });
});

describe('reloading the rules on SIGHUP', () => {
  it('replaces the rules with a good file and keeps the old ones when the new file is bad', async () => {
    const path = rulesFile('reloaded.json', [{ path: '/only/*', permissions: 'x' }]);
    const local = await testKeygate({ FORWARD_AUTH_RULES_FILE: path });
    try {
      const key = await local.createKey(60, { level: 3, permissions: ['y'] });
      const ask = async () =>
        (
          await local.req('GET', '/forward-auth', {
            headers: {
              ...local.basic(key.key, key.secret),
              'x-forwarded-method': 'GET',
              'x-forwarded-uri': '/only/1',
            },
          })
        ).status;
      expect(await ask()).toBe(403);
      writeFileSync(path, JSON.stringify([{ path: '/only/*', permissions: 'y' }]));
      expect(local.keygate.reloadForwardAuthRules()).toBe(true);
      expect(await ask()).toBe(200);
      writeFileSync(path, JSON.stringify([{ path: '/only/*', permissions: 'x', extra: 1 }]));
      expect(local.keygate.reloadForwardAuthRules()).toBe(false);
      expect(await ask()).toBe(200);
      const warned = local.logLines('forward-auth rules not reloaded: the old rules stay');
      expect(warned).toHaveLength(1);
      expect(warned[0].reason).toContain('rule 1');
    } finally {
      await local.close();
    }
  });
});

describe('FORWARD_AUTH_DEFAULT=deny', () => {
  it('refuses a request no rule matches with 403 NO_RULE, with or without a credential', async () => {
    const path = rulesFile('deny.json', [{ path: '/open', allow: 'anyone' }]);
    const local = await testKeygate({ FORWARD_AUTH_RULES_FILE: path, FORWARD_AUTH_DEFAULT: 'deny' });
    try {
      const key = await local.createKey(61, { level: 8 });
      for (const headers of [{}, local.basic(key.key, key.secret)]) {
        const response = await local.req('GET', '/forward-auth/elsewhere', { headers });
        expect(response.status).toBe(403);
        expect(response.headers.get('x-keygate-code')).toBe('NO_RULE');
      }
      expect((await local.req('GET', '/forward-auth/open')).status).toBe(200);
    } finally {
      await local.close();
    }
  });
});

describe('where a key may be used from, through forward-auth and the /key routes', () => {
  let fenced: { key: string; secret: string };
  beforeAll(async () => {
    fenced = await k.createKey(70, { level: 3, allowedIps: ['203.0.113.0/24'] });
  });
  const fromPeer = (peer: string, forwardedFor?: string) =>
    k.req('GET', '/forward-auth', {
      peer,
      headers: {
        ...k.basic(fenced.key, fenced.secret),
        ...(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }),
      },
    });

  it.each([
    ['203.0.113.5', undefined, 200],
    ['198.51.100.1', undefined, 403],
    ['::ffff:203.0.113.5', undefined, 200],
    ['198.51.100.1', '203.0.113.5', 403],
    ['10.1.1.1', '203.0.113.5', 200],
    ['10.1.1.1', '203.0.113.5, 10.2.2.2', 200],
    ['10.1.1.1', '203.0.113.5, 198.51.100.1', 403],
    ['10.1.1.1', '198.51.100.1, 203.0.113.5', 200],
    ['::1', '203.0.113.7', 200],
    ['10.1.1.1', 'not-an-address, 203.0.113.5', 200],
    ['10.1.1.1', '203.0.113.5, garbage', 403],
    ['10.1.1.1', undefined, 403],
  ])('peer %s with X-Forwarded-For %j: %i', async (peer, forwardedFor, status) => {
    const response = await fromPeer(peer, forwardedFor);
    expect(response.status).toBe(status);
    if (status === 403) expect(response.headers.get('x-keygate-code')).toBe('IP_NOT_ALLOWED');
  });

  it('lets a client of an untrusted peer change nothing by sending its own X-Forwarded-For', async () => {
    const plain = await testKeygate();
    try {
      const key = await plain.createKey(71, { level: 3, allowedIps: ['203.0.113.0/24'] });
      const response = await plain.req('GET', '/forward-auth', {
        peer: '198.51.100.9',
        headers: { ...plain.basic(key.key, key.secret), 'x-forwarded-for': '203.0.113.5' },
      });
      expect(response.status).toBe(403);
      expect(response.headers.get('x-keygate-code')).toBe('IP_NOT_ALLOWED');
    } finally {
      await plain.close();
    }
  });

  it('refuses the /key routes to a key used from outside its list with a 403', async () => {
    const inside = await k.req('GET', '/apikeys/key', {
      peer: '203.0.113.1',
      headers: k.basic(fenced.key, fenced.secret),
    });
    expect(inside.status).toBe(200);
    const outside = await k.req('GET', '/apikeys/key', {
      peer: '192.0.2.1',
      headers: k.basic(fenced.key, fenced.secret),
    });
    expect(outside.status).toBe(403);
    expect(outside.json.error).toContain('address');
  });

  it('makes a key with allowedIps a leaf: it may not create other keys', async () => {
    const created = await k.req('POST', '/apikeys/key', {
      peer: '203.0.113.1',
      headers: k.basic(fenced.key, fenced.secret),
      body: { name: 'child', level: 1, expiresIn: 60 },
    });
    expect(created.status).toBe(403);
  });

  it('lets a key narrow its own list, never widen or remove it', async () => {
    const own = await k.createKey(72, { level: 3, allowedIps: ['203.0.113.0/24'] });
    const patch = (body: unknown) =>
      k.req('PATCH', `/apikeys/${own.key}/key`, {
        peer: '203.0.113.9',
        headers: k.basic(own.key, own.secret),
        body,
      });
    expect((await patch({ allowedIps: ['203.0.0.0/16'] })).status).toBe(403);
    expect((await patch({ allowedIps: null })).status).toBe(403);
    const narrowed = await patch({ allowedIps: ['203.0.113.0/25', '203.0.113.9'] });
    expect(narrowed.status).toBe(200);
    expect(narrowed.json.apikey.allowedIps).toEqual(['203.0.113.0/25', '203.0.113.9']);
  });
});
