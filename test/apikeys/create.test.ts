// Creating keys over HTTP, under both schemes: the contract's status table, bodies and headers.
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { START, type TestKeygate, type TestResponse, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
});
afterEach(() => k.close());

const VALID = { name: 'ci', level: 3, expiresIn: 3600 };

/** Credentials for user 42 at level 8 under each scheme. */
const schemes = {
  jwt: async () => k.bearer(42),
  key: async () => {
    const parent = await k.createKey(42, { level: 8 });
    return k.basic(parent.key, parent.secret);
  },
};

function expectError(response: TestResponse, status: number) {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toStartWith('application/json');
  expect(response.json.result).toBe('error');
  expect(typeof response.json.error).toBe('string');
  expect(response.json.error.length).toBeGreaterThan(5);
  expect(Object.keys(response.json).sort()).toEqual(['error', 'result']);
}

describe.each(Object.keys(schemes) as Array<keyof typeof schemes>)('POST /apikeys/%s', (scheme) => {
  const path = `/apikeys/${scheme}`;

  it('creates a key: 201, no-store, the full apikey object', async () => {
    const response = await k.req('POST', path, { headers: await schemes[scheme](), body: VALID });
    expect(response.status).toBe(201);
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('content-type')).toStartWith('application/json');
    const { result, apikey, error } = response.json;
    expect(result).toBe('success');
    expect(error).toBeUndefined();
    expect(Object.keys(apikey).sort()).toEqual(['expiresAt', 'key', 'level', 'name', 'secret', 'userId']);
    expect(apikey.key).toMatch(/^kg_[A-Za-z0-9]{22,}$/);
    expect(apikey.secret).toMatch(/^kgs_[0-9A-Za-z]{49}$/);
    expect(apikey.level).toBe(3);
    expect(apikey.name).toBe('ci');
    expect(apikey.userId).toBe(42);
    expect(apikey.expiresAt).toBe(new Date(START + 3600_000).toISOString());
  });

  it('starts each id with its creation time, so later keys sort after earlier ones', async () => {
    const headers = await schemes[scheme]();
    const first = await k.req('POST', path, { headers, body: VALID });
    k.time.now += 1;
    const second = await k.req('POST', path, { headers, body: VALID });
    const [a, b] = [first.json.apikey.key as string, second.json.apikey.key as string];
    expect(a.slice(0, 11)).not.toBe(b.slice(0, 11));
    expect(Buffer.compare(Buffer.from(a), Buffer.from(b))).toBe(-1);
  });

  it('gives every key a different id and secret', async () => {
    const headers = await schemes[scheme]();
    const created = await Promise.all(
      Array.from({ length: 20 }, () => k.req('POST', path, { headers, body: VALID })),
    );
    expect(new Set(created.map((r) => r.json.apikey.key)).size).toBe(20);
    expect(new Set(created.map((r) => r.json.apikey.secret)).size).toBe(20);
  });

  it('answers 401 with WWW-Authenticate when the scheme has no credentials, even for a bad body', async () => {
    for (const body of [VALID, '{not json', undefined]) {
      const response = await k.req('POST', path, { body });
      expectError(response, 401);
      expect(response.headers.get('www-authenticate')).toContain(scheme === 'jwt' ? 'Bearer' : 'Basic');
    }
  });

  it('answers 403 before looking at the body when credentials are invalid', async () => {
    const bad =
      scheme === 'jwt'
        ? { authorization: 'Bearer not.a.token' }
        : k.basic('kg_0000000000000000000000', 'nope');
    expectError(await k.req('POST', path, { headers: bad, body: '{not json' }), 403);
  });

  it('never reads the body of a caller it refuses (401, 403), and reads it for one it accepts', async () => {
    const bad =
      scheme === 'jwt'
        ? { authorization: 'Bearer not.a.token' }
        : k.basic('kg_0000000000000000000000', 'nope');
    expect(await k.postTellingIfRead(path, {}, VALID)).toEqual({ status: 401, read: false });
    expect(await k.postTellingIfRead(path, bad, VALID)).toEqual({ status: 403, read: false });
    expect(await k.postTellingIfRead(path, await schemes[scheme](), VALID)).toEqual({
      status: 201,
      read: true,
    });
  });

  it.each([
    ['not JSON', '{"name":', 'JSON'],
    ['an array', [VALID], 'object'],
    ['null', 'null', 'object'],
    ['a string', '"x"', 'object'],
    ['empty', '', 'empty'],
    ['missing name', { level: 1, expiresIn: 10 }, 'name is required'],
    ['missing level', { name: 'a', expiresIn: 10 }, 'level is required'],
    ['missing expiresIn', { name: 'a', level: 1 }, 'expiresIn is required'],
    ['an extra property', { ...VALID, userId: 1 }, '"userId"'],
    ['__proto__', '{"name":"a","level":1,"expiresIn":10,"__proto__":{}}', '"__proto__"'],
    ['level as a string', { ...VALID, level: '3' }, 'level'],
    ['level 1.5', { ...VALID, level: 1.5 }, 'level'],
    ['level 9', { ...VALID, level: 9 }, 'level'],
    ['level -1', { ...VALID, level: -1 }, 'level'],
    ['level null', { ...VALID, level: null }, 'level'],
    ['level 1e308', '{"name":"a","level":1e308,"expiresIn":10}', 'level'],
    ['expiresIn 0', { ...VALID, expiresIn: 0 }, 'expiresIn'],
    ['expiresIn -5', { ...VALID, expiresIn: -5 }, 'expiresIn'],
    ['expiresIn 1.5', { ...VALID, expiresIn: 1.5 }, 'expiresIn'],
    ['expiresIn as a string', { ...VALID, expiresIn: '60' }, 'expiresIn'],
    ['expiresIn beyond ten years', { ...VALID, expiresIn: 315360001 }, 'expiresIn'],
    ['name empty', { ...VALID, name: '' }, 'name'],
    ['name only whitespace', { ...VALID, name: ' \t\n ' }, 'name'],
    ['name 129 characters', { ...VALID, name: 'x'.repeat(129) }, 'name'],
    ['name 129 emoji', { ...VALID, name: '😀'.repeat(129) }, 'name'],
    ['name a lone surrogate', '{"name":"a\\ud800","level":1,"expiresIn":10}', 'name'],
    ['name a number', { ...VALID, name: 5 }, 'name'],
    ['name containing NUL', { ...VALID, name: 'a\u0000b' }, 'control characters'],
    ['name only NUL', { ...VALID, name: '\u0000' }, 'control characters'],
    ['name containing CR LF', { ...VALID, name: 'ci\r\nforged: line' }, 'control characters'],
    ['name containing a tab', { ...VALID, name: 'a\tb' }, 'control characters'],
    ['name containing DEL', { ...VALID, name: 'a\u007Fb' }, 'control characters'],
    ['name containing a C1 control (U+009B)', { ...VALID, name: 'a\u009Bb' }, 'control characters'],
    ['name containing U+202E', { ...VALID, name: 'abc\u202Etxt.exe' }, 'bidi control'],
    ['name containing U+202A', { ...VALID, name: '\u202Aabc' }, 'bidi control'],
    ['name containing U+2066', { ...VALID, name: 'a\u2066b' }, 'bidi control'],
    ['name containing U+2069', { ...VALID, name: 'a\u2069b' }, 'bidi control'],
    ['name only U+200B', { ...VALID, name: '\u200B' }, 'visible'],
    ['name only invisible characters', { ...VALID, name: '\u200B\u200D\u2060\uFEFF\u00AD ' }, 'visible'],
    ['name only no-break spaces', { ...VALID, name: '\u00A0\u3000' }, 'visible'],
    ['name only tag characters', { ...VALID, name: '\u{E0041}\u{E0042}' }, 'visible'],
  ])('answers 400 for a body that is %s', async (_, body, mentions) => {
    const response = await k.req('POST', path, { headers: await schemes[scheme](), body });
    expectError(response, 400);
    expect(response.json.error).toContain(mentions);
  });

  // Bytes around a name's value: '{"name":"' + bytes + '","level":1,"expiresIn":10}'.
  const withNameBytes = (...bytes: number[]) =>
    new Uint8Array([
      ...new TextEncoder().encode('{"name":"a'),
      ...bytes,
      ...new TextEncoder().encode('","level":1,"expiresIn":10}'),
    ]);

  it.each([
    ['a lone 0xFF byte', [0xff]],
    ['a continuation byte alone', [0x80]],
    ['a truncated four-byte sequence (one U+FFFD for three bytes)', [0xf0, 0x9f, 0x98]],
    ['an overlong "/"', [0xc0, 0xaf]],
    ['an encoded surrogate', [0xed, 0xa0, 0x80]],
    ['a real U+FFFD beside an invalid byte', [0xef, 0xbf, 0xbd, 0xff]],
  ])('answers 400 for a body that is not UTF-8: %s', async (_, bytes) => {
    const response = await k.req('POST', path, {
      headers: { ...(await schemes[scheme]()), 'content-type': 'application/json' },
      body: withNameBytes(...bytes),
    });
    expectError(response, 400);
    expect(response.json.error).toBe('The body is not valid UTF-8.');
  });

  it('keeps a U+FFFD the client sent in a name (valid UTF-8: EF BF BD)', async () => {
    const response = await k.req('POST', path, {
      headers: { ...(await schemes[scheme]()), 'content-type': 'application/json' },
      body: withNameBytes(0xef, 0xbf, 0xbd, 0xf0, 0x9f, 0x98, 0x80),
    });
    expect(response.status).toBe(201);
    expect(response.json.apikey.name).toBe('a\uFFFD\u{1F600}');
  });

  it.each([
    ['text/plain', 'text/plain'],
    ['form', 'application/x-www-form-urlencoded'],
    ['none', undefined],
  ])('answers 400 for Content-Type %s', async (_, contentType) => {
    const headers: Record<string, string> = { ...(await schemes[scheme]()) };
    if (contentType) headers['content-type'] = contentType;
    const response = await k.req('POST', path, {
      headers,
      body: new TextEncoder().encode(JSON.stringify(VALID)),
    });
    expectError(response, 400);
    expect(response.json.error).toContain('Content-Type');
  });

  it.each([
    ['latin1', 'application/json; charset=latin1'],
    ['iso-8859-1', 'application/json;charset=ISO-8859-1'],
    ['utf-16', 'application/json; charset="utf-16"'],
  ])('answers 400 for a charset other than utf-8 (%s)', async (_, contentType) => {
    const headers = { ...(await schemes[scheme]()), 'content-type': contentType };
    const response = await k.req('POST', path, { headers, body: JSON.stringify(VALID) });
    expectError(response, 400);
    expect(response.json.error).toContain('utf-8');
  });

  it.each([
    ['lower case', 'application/json; charset=utf-8'],
    ['upper case and quoted', 'application/json; charset="UTF-8"'],
    ['another parameter first', 'application/json; foo=bar; charset=utf-8'],
  ])('accepts application/json with charset utf-8, %s', async (_, contentType) => {
    const headers = { ...(await schemes[scheme]()), 'content-type': contentType };
    expect((await k.req('POST', path, { headers, body: JSON.stringify(VALID) })).status).toBe(201);
  });

  it('accepts application/json with a charset', async () => {
    const headers = { ...(await schemes[scheme]()), 'content-type': 'application/json; charset=utf-8' };
    expect((await k.req('POST', path, { headers, body: JSON.stringify(VALID) })).status).toBe(201);
  });

  it.each([
    ['128 ASCII characters', 'x'.repeat(128)],
    ['128 emoji', '😀'.repeat(128)],
    ['CJK and accents', '日本語のキー — café'],
    ['surrounding spaces', '  padded  '],
    ['an emoji sequence with a zero-width joiner', '👩\u200D💻 laptop'],
    ['right-to-left script', 'مفتاح'],
    ['one emoji', '😀'],
  ])('keeps a name of %s exactly', async (_, name) => {
    const response = await k.req('POST', path, {
      headers: await schemes[scheme](),
      body: { ...VALID, name },
    });
    expect(response.status).toBe(201);
    expect(response.json.apikey.name).toBe(name);
  });

  it('accepts the bounds: level 0 and 8, expiresIn 1 and ten years', async () => {
    const headers = await schemes[scheme]();
    for (const body of [
      { ...VALID, level: 0, expiresIn: 1 },
      { ...VALID, level: 8, expiresIn: 315360000 },
    ]) {
      const response = await k.req('POST', path, { headers, body });
      expect(response.status).toBe(201);
      expect(Date.parse(response.json.apikey.expiresAt)).toBe(START + body.expiresIn * 1000);
    }
  });

  it('answers 413 in the error shape for a body over 16 KiB', async () => {
    const body = JSON.stringify({ ...VALID, name: 'x'.repeat(17 * 1024) });
    expectError(await k.req('POST', path, { headers: await schemes[scheme](), body }), 413);
  });

  it('answers 413 for an oversized chunked body with no Content-Length', async () => {
    const bytes = new TextEncoder().encode(JSON.stringify({ ...VALID, name: 'x'.repeat(20_000) }));
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(bytes);
        controller.close();
      },
    });
    const headers = { ...(await schemes[scheme]()), 'content-type': 'application/json' };
    const response = await k.keygate.handle(
      new Request(`http://localhost${path}`, {
        method: 'POST',
        headers,
        body: stream,
        duplex: 'half',
      } as RequestInit),
    );
    expect(response.status).toBe(413);
    expect(((await response.json()) as { result: string }).result).toBe('error');
  });
});
