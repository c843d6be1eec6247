// Hostile HTTP input, defined once: the generators of random and mutated requests, the model of what
// was acknowledged, and the invariants every response must keep. test/fuzz/*.test.ts runs it briefly
// on every `bun test`; scripts/fuzz.ts runs the same property for as many requests as asked.
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { SignJWT } from 'jose';
import { loadConfig } from '../../src/config';
import { createKeygate, type Keygate } from '../../src/keygate';
import { createLogger, type Logger } from '../../src/log';

export const FUZZ_JWT_SECRET = 'fuzz-secret-that-is-at-least-32-bytes-long!!';
const OTHER_SECRET = 'another-secret-that-is-at-least-32-bytes-long';
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const T0_S = T0 / 1000;
/** Small, so the 409 path is reached within a short sequence. */
const MAX_KEYS_PER_USER = 6;
const MAX_EXPIRES_IN = 315_360_000;
const KEY_ID = /^kg_[A-Za-z0-9]{22,}$/;
const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

// ---------------------------------------------------------------- tokens (made once, clock fixed at T0)

type TokenName = (typeof VALID_TOKENS)[number]['name'] | (typeof INVALID_TOKEN_NAMES)[number];

const VALID_TOKENS = [
  { name: 'user1', userId: 1, level: 8, claims: { sub: '1' } },
  { name: 'user1-level2', userId: 1, level: 2, claims: { sub: '1', level: 2 } },
  { name: 'user2', userId: 2, level: 8, claims: { sub: 2 } },
  { name: 'user0-level0', userId: 0, level: 0, claims: { sub: '0', level: 0 } },
  { name: 'user-max', userId: Number.MAX_SAFE_INTEGER, level: 8, claims: { sub: '9007199254740991' } },
] as const;

const INVALID_TOKEN_NAMES = [
  'expired',
  'not-yet-valid',
  'no-exp',
  'no-sub',
  'sub-negative',
  'sub-fraction',
  'sub-word',
  'sub-unsafe',
  'sub-object',
  'level-9',
  'level-text',
  'level-negative',
  'level-fraction',
  'hs512',
  'alg-none',
  'other-secret',
  'empty-payload',
] as const;

type TokenPool = {
  valid: Map<string, { token: string; userId: number; level: number }>;
  all: Map<string, string>;
};

async function hs256(claims: Record<string, unknown>, secret = FUZZ_JWT_SECRET, alg = 'HS256') {
  return new SignJWT(claims).setProtectedHeader({ alg, typ: 'JWT' }).sign(new TextEncoder().encode(secret));
}

function unsigned(claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.`;
}

let tokenPool: Promise<TokenPool> | undefined;

/** Every token the fuzzer may send, valid or not; none of them may ever come back in a response. */
export function tokens(): Promise<TokenPool> {
  tokenPool ??= (async () => {
    const exp = T0_S + 3600;
    const valid = new Map<string, { token: string; userId: number; level: number }>();
    for (const t of VALID_TOKENS) {
      valid.set(t.name, {
        token: await hs256({ ...t.claims, iat: T0_S, exp }),
        userId: t.userId,
        level: t.level,
      });
    }
    const invalid: Record<(typeof INVALID_TOKEN_NAMES)[number], string> = {
      expired: await hs256({ sub: '1', exp: T0_S - 1 }),
      'not-yet-valid': await hs256({ sub: '1', exp, nbf: T0_S + 600 }),
      'no-exp': await hs256({ sub: '1' }),
      'no-sub': await hs256({ exp }),
      'sub-negative': await hs256({ sub: -1, exp }),
      'sub-fraction': await hs256({ sub: 1.5, exp }),
      'sub-word': await hs256({ sub: 'alice', exp }),
      'sub-unsafe': await hs256({ sub: '99999999999999999', exp }),
      'sub-object': await hs256({ sub: { id: 1 }, exp }),
      'level-9': await hs256({ sub: '1', level: 9, exp }),
      'level-text': await hs256({ sub: '1', level: '3', exp }),
      'level-negative': await hs256({ sub: '1', level: -1, exp }),
      'level-fraction': await hs256({ sub: '1', level: 1.5, exp }),
      hs512: await hs256({ sub: '1', exp }, FUZZ_JWT_SECRET, 'HS512'),
      'alg-none': unsigned({ sub: '1', exp }),
      'other-secret': await hs256({ sub: '1', exp }, OTHER_SECRET),
      'empty-payload': await hs256({}),
    };
    const all = new Map<string, string>([...valid].map(([name, t]) => [name, t.token]));
    for (const [name, token] of Object.entries(invalid)) all.set(name, token);
    return { valid, all };
  })();
  return tokenPool;
}

// ---------------------------------------------------------------- request descriptions (plain data)

type Scheme = 'jwt' | 'key';

export type Credential =
  | { kind: 'none' }
  | { kind: 'token'; name: TokenName }
  /** A valid token with one character of one segment changed (never the signature's last, whose low bits are padding). */
  | { kind: 'tampered-token'; name: TokenName; segment: 0 | 1 | 2; position: number; replacement: string }
  | { kind: 'key'; ref: number; form: 'basic' | 'headers'; secret: 'own' | 'other' | 'truncated' | 'flipped' }
  | { kind: 'unknown-key'; form: 'basic' | 'headers' }
  | { kind: 'raw-authorization'; value: string }
  | { kind: 'raw-api-headers'; key: string | null; secret: string | null };

export type Body =
  | { kind: 'none' }
  | { kind: 'create'; name: string; level: number; expiresIn: number }
  | { kind: 'fields'; fields: Array<[string, string]> }
  | { kind: 'json'; value: unknown }
  | { kind: 'text'; text: string }
  | { kind: 'bytes'; bytes: Uint8Array }
  | { kind: 'mutated'; name: string; edits: Array<{ at: number; remove: number; insert: string }> }
  | { kind: 'nested'; depth: number; open: string }
  | { kind: 'huge'; size: number; inName: boolean };

export type Target =
  | { kind: 'create'; scheme: Scheme }
  | { kind: 'delete'; scheme: Scheme; id: DeleteId }
  | { kind: 'path'; path: string };

export type DeleteId =
  | { kind: 'known'; ref: number }
  | { kind: 'unknown' }
  | { kind: 'raw'; segment: string };

export type FuzzRequest = {
  method: string | null;
  target: Target;
  query: string;
  credential: Credential;
  body: Body;
  contentType: string[] | null;
  headers: Array<[string, string]>;
};

export type Step =
  | { kind: 'request'; request: FuzzRequest }
  | { kind: 'burst'; requests: FuzzRequest[] }
  | { kind: 'tick'; seconds: number };

// ---------------------------------------------------------------- generators

const BOUND_NUMBERS = [
  '0',
  '-0',
  '8',
  '9',
  '-1',
  '1.5',
  '0.0',
  '8.0',
  '1e0',
  '8e0',
  '1E1',
  '1e308',
  '-1e308',
  '1e309',
  '5e-324',
  '1e-400',
  '9007199254740991',
  '9007199254740992',
  '9007199254740993',
  '315360000',
  '315360001',
  '4294967296',
  '1.0000000000000002',
  'NaN',
  'Infinity',
  '-Infinity',
  '0x10',
  '01',
  '+1',
  '.5',
  '1.',
  '"3"',
  '"NaN"',
  'true',
  'null',
  '[]',
  '{}',
  '[1]',
];

const hostileString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 200 }),
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.constantFrom(
    '',
    ' ',
    '\t\n',
    '\u0000',
    '\u200b',
    '\ud800',
    '\udfff',
    '😀'.repeat(128),
    'é'.repeat(129),
    'a'.repeat(129),
    '../../etc/passwd',
    '<script>',
    '%00',
    '\\u0000',
  ),
);

const jsonText = (value: string) => JSON.stringify(value);

const numberText = fc.oneof(
  fc.constantFrom(...BOUND_NUMBERS),
  fc.double().map(String),
  fc.integer().map(String),
  fc.bigInt().map(String),
);

const fieldsBody: fc.Arbitrary<Body> = fc
  .record({
    name: fc.option(fc.oneof(hostileString.map(jsonText), numberText), { nil: undefined }),
    level: fc.option(numberText, { nil: undefined }),
    expiresIn: fc.option(numberText, { nil: undefined }),
    extra: fc.array(
      fc.tuple(
        fc.oneof(
          fc.constantFrom(
            '__proto__',
            'constructor',
            'prototype',
            'userId',
            'secret',
            'key',
            'level',
            'name',
            'toString',
          ),
          fc.string(),
        ),
        numberText,
      ),
      { maxLength: 3 },
    ),
  })
  .map(({ name, level, expiresIn, extra }) => {
    const fields: Array<[string, string]> = [];
    if (name !== undefined) fields.push(['name', name]);
    if (level !== undefined) fields.push(['level', level]);
    if (expiresIn !== undefined) fields.push(['expiresIn', expiresIn]);
    fields.push(...extra);
    return { kind: 'fields', fields };
  });

const validName = fc.oneof(
  fc.constantFrom('ci', 'deploy key', 'ключ', '鍵', '🔑 prod', 'x'),
  fc
    .string({ unit: 'grapheme', minLength: 1, maxLength: 128 })
    .filter((s) => s.trim() !== '' && [...s].length <= 128),
);

const createBody: fc.Arbitrary<Body> = fc.record({
  kind: fc.constant('create' as const),
  name: validName,
  level: fc.integer({ min: 0, max: 8 }),
  expiresIn: fc.oneof(
    fc.integer({ min: 1, max: 5 }),
    fc.integer({ min: 1, max: MAX_EXPIRES_IN }),
    fc.constant(MAX_EXPIRES_IN),
  ),
});

const body: fc.Arbitrary<Body> = fc.oneof(
  { weight: 12, arbitrary: createBody },
  { weight: 4, arbitrary: fieldsBody },
  { weight: 1, arbitrary: fc.constant({ kind: 'none' } as Body) },
  { weight: 2, arbitrary: fc.jsonValue().map((value) => ({ kind: 'json', value }) as Body) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary' }).map((text) => ({ kind: 'text', text }) as Body) },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ maxLength: 200 }).map((bytes) => ({ kind: 'bytes', bytes }) as Body),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('mutated' as const),
      name: validName,
      edits: fc.array(fc.record({ at: fc.nat(80), remove: fc.nat(3), insert: fc.string({ maxLength: 3 }) }), {
        minLength: 1,
        maxLength: 4,
      }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('nested' as const),
      depth: fc.integer({ min: 1, max: 8000 }),
      open: fc.constantFrom('[', '{"a":'),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('huge' as const),
      size: fc.integer({ min: 16_000, max: 40_000 }),
      inName: fc.boolean(),
    }),
  },
);

const tokenName = fc.constantFrom<TokenName>(...VALID_TOKENS.map((t) => t.name), ...INVALID_TOKEN_NAMES);
const validTokenName = fc.constantFrom<TokenName>(...VALID_TOKENS.map((t) => t.name));
const keyForm = fc.constantFrom<'basic' | 'headers'>('basic', 'headers');
const headerValue = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.string({ unit: 'binary-ascii', maxLength: 60 }),
  fc.constantFrom('', ' ', 'null', 'undefined', 'ÿ', 'a'.repeat(9000)),
);

const credential = (scheme: Scheme): fc.Arbitrary<Credential> => {
  const own: fc.Arbitrary<Credential> =
    scheme === 'jwt'
      ? validTokenName.map((name) => ({ kind: 'token', name }) as Credential)
      : fc.record({
          kind: fc.constant('key' as const),
          ref: fc.nat(),
          form: keyForm,
          secret: fc.constant('own' as const),
        });
  const hostile: fc.Arbitrary<Credential> = fc.oneof(
    fc.constant({ kind: 'none' } as Credential),
    tokenName.map((name) => ({ kind: 'token', name }) as Credential),
    fc.record({
      kind: fc.constant('tampered-token' as const),
      name: validTokenName,
      segment: fc.constantFrom<0 | 1 | 2>(0, 1, 2),
      position: fc.nat(),
      replacement: fc.constantFrom(...'AQgw_-09azZ.=+/ '),
    }),
    fc.record({
      kind: fc.constant('key' as const),
      ref: fc.nat(),
      form: keyForm,
      secret: fc.constantFrom('own', 'other', 'truncated', 'flipped'),
    }),
    fc.record({ kind: fc.constant('unknown-key' as const), form: keyForm }),
    fc
      .oneof(
        headerValue,
        headerValue.map((v) => `Basic ${v}`),
        headerValue.map((v) => `Bearer ${v}`),
        fc.string({ unit: 'binary', maxLength: 60 }).map((v) => `Basic ${Buffer.from(v).toString('base64')}`),
        fc.constantFrom(
          'Basic',
          'Bearer',
          'basic  Zm9vOmJhcg==',
          'Basic Zm9vOg==',
          'Basic OmJhcg==',
          'Basic Og==',
          'Basic ====',
          'Basic Zm9v',
          'Bearer a.b.c',
          'Bearer ..',
          'Bearer a b',
          'Digest x',
        ),
      )
      .map((value) => ({ kind: 'raw-authorization', value }) as Credential),
    fc.record({
      kind: fc.constant('raw-api-headers' as const),
      key: fc.option(headerValue, { nil: null }),
      secret: fc.option(headerValue, { nil: null }),
    }),
  );
  return fc.oneof({ weight: 3, arbitrary: own }, { weight: 2, arbitrary: hostile });
};

const rawSegment = fc.oneof(
  fc.constantFrom(
    '',
    '.',
    '..',
    '%2e%2e',
    '%2E',
    'kg_',
    'kg_%2F..%2F..',
    '%2F',
    '%2f%2f',
    'kg_aaaaaaaaaaaaaaaaaaaaaa%2F',
    '%zz',
    '%',
    '%C0%AF',
    '%E0%A4%A',
    '%00',
    '%FF',
    'kg_aaaaaaaaaaaaaaaaaaaaaa%00',
    'kg_aaaaaaaaaaaaaaaaaaaaa',
    `kg_${'a'.repeat(129)}`,
    `kg_${'a'.repeat(5000)}`,
    'KG_aaaaaaaaaaaaaaaaaaaaaa',
    'kg_aaaaaaaaaaaaaaaaaaaaa!',
    '%6bg_aaaaaaaaaaaaaaaaaaaaaa',
  ),
  fc.string().map(encodeURIComponent),
  fc.string({ unit: 'binary', maxLength: 40 }).map(encodeURIComponent),
  fc.stringMatching(/^[A-Za-z0-9%._~-]{0,40}$/),
);

const target: fc.Arbitrary<Target> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('create' as const),
      scheme: fc.constantFrom<Scheme>('jwt', 'key'),
    }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('delete' as const),
      scheme: fc.constantFrom<Scheme>('jwt', 'key'),
      id: fc.oneof(
        { weight: 4, arbitrary: fc.record({ kind: fc.constant('known' as const), ref: fc.nat() }) },
        { weight: 1, arbitrary: fc.constant({ kind: 'unknown' } as DeleteId) },
        { weight: 2, arbitrary: rawSegment.map((segment) => ({ kind: 'raw', segment }) as DeleteId) },
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc
      .oneof(
        fc.constantFrom(
          '/health',
          '/openapi',
          '/openapi/json',
          '/',
          '/apikeys',
          '/apikeys/',
          '/apikeys/jwt/',
          '/apikeys//jwt',
          '/APIKEYS/JWT',
          '/apikeys/jwt/x',
          '/apikeys%2Fjwt',
          '/apikeys/./jwt',
          '/apikeys/x/../jwt',
          '/%2e%2e/health',
          '//health',
          '/health/',
          '/health%00',
        ),
        fc.array(rawSegment, { maxLength: 4 }).map((segments) => `/${segments.join('/')}`),
      )
      .map((path) => ({ kind: 'path', path }) as Target),
  },
);

const oddContentType = fc.oneof(
  fc.constantFrom(
    'application/json; charset=utf-8',
    'APPLICATION/JSON',
    'application/json;',
    'application/json ; charset=utf-16',
    'text/plain',
    'text/json',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/jsonx',
    'application/json, text/plain',
    '',
    'application/vnd.api+json',
    'application/*',
    '*/*',
  ),
  headerValue,
);

const contentType: fc.Arbitrary<string[] | null> = fc.oneof(
  { weight: 12, arbitrary: fc.constant<string[]>(['application/json']) },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: oddContentType.map((value) => [value]) },
  {
    weight: 1,
    arbitrary: fc.array(fc.oneof(fc.constant('application/json'), oddContentType), {
      minLength: 2,
      maxLength: 3,
    }),
  },
);

const extraHeaders = fc.array(
  fc.tuple(
    fc.oneof(
      fc.constantFrom(
        'authorization',
        'x-api-key',
        'x-api-secret',
        'content-type',
        'content-length',
        'transfer-encoding',
        'x-request-id',
        'cookie',
        'accept',
        'accept-encoding',
        'host',
        'origin',
        'x-forwarded-for',
        'x-http-method-override',
        'expect',
        'connection',
        'range',
        'if-none-match',
      ),
      fc.stringMatching(/^[a-z0-9-]{1,20}$/),
    ),
    fc.oneof(
      headerValue,
      fc.constantFrom(
        '0',
        '16384',
        '16385',
        '99999999999',
        '-1',
        '1e3',
        'chunked',
        'gzip',
        '100-continue',
        'bytes=0-0',
        'a=b; c=%zz',
      ),
    ),
  ),
  { maxLength: 4 },
);

const method = fc.oneof(
  { weight: 8, arbitrary: fc.constant(null) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'GET',
      'HEAD',
      'POST',
      'PUT',
      'PATCH',
      'DELETE',
      'OPTIONS',
      'post',
      'Delete',
      'PROPFIND',
      'M-SEARCH',
    ),
  },
);

export const fuzzRequest: fc.Arbitrary<FuzzRequest> = target.chain((t) =>
  fc.record({
    method,
    target: fc.constant(t),
    query: fc.oneof(
      { weight: 8, arbitrary: fc.constant('') },
      { weight: 1, arbitrary: fc.constantFrom('?', '?a=1&a=2', '?%zz', '?__proto__[x]=1', '?key=kg_x#frag') },
    ),
    credential: credential(t.kind === 'path' ? 'jwt' : t.scheme),
    body:
      t.kind === 'delete'
        ? fc.oneof(
            { weight: 6, arbitrary: fc.constant({ kind: 'none' } as Body) },
            { weight: 1, arbitrary: body },
          )
        : body,
    contentType,
    headers: fc.oneof(
      { weight: 3, arbitrary: fc.constant([] as Array<[string, string]>) },
      { weight: 2, arbitrary: extraHeaders },
    ),
  }),
);

export const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 20, arbitrary: fuzzRequest.map((request) => ({ kind: 'request', request }) as Step) },
  {
    weight: 2,
    arbitrary: fc
      .array(fuzzRequest, { minLength: 2, maxLength: 6 })
      .map((requests) => ({ kind: 'burst', requests }) as Step),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 0, max: 4 }).map((seconds) => ({ kind: 'tick', seconds }) as Step),
  },
);

// ---------------------------------------------------------------- the world one sequence runs against

type KnownKey = {
  id: string;
  secret: string;
  userId: number;
  level: number;
  expiresAt: number;
  deleted: boolean;
};
type Caller = { userId: number; level: number };

export type FuzzStats = { requests: number; unsendable: number; statuses: Record<number, number> };

export function newStats(): FuzzStats {
  return { requests: 0, unsendable: 0, statuses: {} };
}

class World {
  readonly time = { now: T0 };
  readonly logged: string[] = [];
  readonly keygate: Keygate;
  readonly known: KnownKey[] = [];
  readonly violations: string[] = [];
  readonly logger: Logger;

  constructor(readonly pool: TokenPool) {
    const config = loadConfig({
      DATABASE_URL: ':memory:',
      JWT_SECRET: FUZZ_JWT_SECRET,
      MAX_KEYS_PER_USER: String(MAX_KEYS_PER_USER),
    });
    // Only warnings and errors are kept: an "unexpected error" line is a violation on its own.
    this.logger = createLogger('warn', (chunk) => this.logged.push(chunk));
    this.keygate = createKeygate(config, {
      jwtSecret: FUZZ_JWT_SECRET,
      logger: this.logger,
      clock: () => this.time.now,
    });
  }

  liveKeysOf(userId: number): number {
    return this.known.filter((k) => !k.deleted && k.userId === userId && k.expiresAt > this.time.now).length;
  }

  pick(ref: number): KnownKey | undefined {
    return this.known.length === 0 ? undefined : this.known[ref % this.known.length];
  }
}

const NEVER_CREATED = 'kg_0000000000000000000000';

/** Headers and who the credential speaks for (null: it must not authenticate; undefined: absent). */
function applyCredential(world: World, c: Credential, headers: Headers): Caller | null | undefined {
  switch (c.kind) {
    case 'none':
      return undefined;
    case 'token': {
      headers.append('authorization', `Bearer ${world.pool.all.get(c.name)}`);
      const valid = world.pool.valid.get(c.name);
      return valid ? { userId: valid.userId, level: valid.level } : null;
    }
    case 'tampered-token': {
      const parts = (world.pool.all.get(c.name) as string).split('.');
      const segment = parts[c.segment] as string;
      const limit = c.segment === 2 ? segment.length - 1 : segment.length;
      const at = c.position % Math.max(limit, 1);
      const replacement = segment[at] === c.replacement ? (c.replacement === 'A' ? 'B' : 'A') : c.replacement;
      parts[c.segment] = segment.slice(0, at) + replacement + segment.slice(at + 1);
      headers.append('authorization', `Bearer ${parts.join('.')}`);
      return null;
    }
    case 'key':
    case 'unknown-key': {
      const key = c.kind === 'key' ? world.pick(c.ref) : undefined;
      const id = key?.id ?? NEVER_CREATED;
      let secret = key?.secret ?? 'A'.repeat(43);
      let valid = key !== undefined && !key.deleted && key.expiresAt > world.time.now;
      if (c.kind === 'key' && c.secret !== 'own') {
        valid = false;
        const other = world.known.find((k) => k.id !== id)?.secret ?? 'B'.repeat(43);
        secret =
          c.secret === 'other'
            ? other
            : c.secret === 'truncated'
              ? secret.slice(0, -1)
              : `${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`;
      }
      if (c.form === 'basic')
        headers.append('authorization', `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`);
      else {
        headers.append('x-api-key', id);
        headers.append('x-api-secret', secret);
      }
      return valid && key ? { userId: key.userId, level: key.level } : null;
    }
    case 'raw-authorization':
      headers.append('authorization', c.value);
      return null;
    case 'raw-api-headers':
      if (c.key !== null) headers.append('x-api-key', c.key);
      if (c.secret !== null) headers.append('x-api-secret', c.secret);
      return c.key === null && c.secret === null ? undefined : null;
  }
}

function bodyBytes(b: Body): string | Uint8Array | undefined {
  switch (b.kind) {
    case 'none':
      return undefined;
    case 'create':
      return JSON.stringify({ name: b.name, level: b.level, expiresIn: b.expiresIn });
    case 'fields':
      return `{${b.fields.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`;
    case 'json':
      return JSON.stringify(b.value);
    case 'text':
      return b.text;
    case 'bytes':
      return b.bytes;
    case 'mutated': {
      let text = JSON.stringify({ name: b.name, level: 1, expiresIn: 60 });
      for (const edit of b.edits) {
        const at = edit.at % (text.length + 1);
        text = text.slice(0, at) + edit.insert + text.slice(at + edit.remove);
      }
      return text;
    }
    case 'nested': {
      const close = b.open === '[' ? ']' : '}';
      const inner = b.open === '[' ? '' : '1';
      return `{"name":${b.open.repeat(b.depth)}${inner}${close.repeat(b.depth)},"level":1,"expiresIn":60}`;
    }
    case 'huge':
      return b.inName
        ? JSON.stringify({ name: 'é'.repeat(b.size), level: 1, expiresIn: 60 })
        : ' '.repeat(b.size);
  }
}

type Sent = {
  request: FuzzRequest;
  caller: Caller | null | undefined;
  deleteId: string | undefined;
  /**
   * What the request turned out to be once the URL was normalised (`/apikeys/./jwt` is a create).
   * Paths are strict: a trailing slash is another path (404).
   */
  route: 'create' | 'delete' | 'other';
};

const CREATE_ROUTE = /^\/apikeys\/(jwt|key)$/;
const DELETE_ROUTE = /^\/apikeys\/([^/]+)\/(jwt|key)$/;

function schemeOf(c: Credential): Scheme | 'either' | 'none' {
  if (c.kind === 'none') return 'none';
  if (c.kind === 'token' || c.kind === 'tampered-token') return 'jwt';
  return c.kind === 'raw-authorization' ? 'either' : 'key';
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function buildRequest(world: World, r: FuzzRequest): { request: Request; sent: Sent } | null {
  const headers = new Headers();
  let path: string;
  let defaultMethod: string;
  try {
    if (r.target.kind === 'create') {
      path = `/apikeys/${r.target.scheme}`;
      defaultMethod = 'POST';
    } else if (r.target.kind === 'delete') {
      const id = r.target.id;
      const segment =
        id.kind === 'known'
          ? (world.pick(id.ref)?.id ?? NEVER_CREATED)
          : id.kind === 'unknown'
            ? NEVER_CREATED
            : id.segment;
      path = `/apikeys/${segment}/${r.target.scheme}`;
      defaultMethod = 'DELETE';
    } else {
      path = r.target.path;
      defaultMethod = 'GET';
    }
    const caller = applyCredential(world, r.credential, headers);
    for (const value of r.contentType ?? []) headers.append('content-type', value);
    for (const [name, value] of r.headers) headers.append(name, value);
    const method = r.method ?? defaultMethod;
    const payload = bodyBytes(r.body);
    const request = new Request(`http://localhost${path}${r.query}`, {
      method,
      headers,
      body: method === 'GET' || method === 'HEAD' ? undefined : payload,
    });
    const { pathname } = new URL(request.url);
    const create = request.method === 'POST' ? CREATE_ROUTE.exec(pathname) : null;
    const remove = request.method === 'DELETE' ? DELETE_ROUTE.exec(pathname) : null;
    const route = create ? 'create' : remove ? 'delete' : 'other';
    const scheme = create?.[1] ?? remove?.[2];
    // A credential of the other scheme is no credential at all for this route.
    const credentialScheme = schemeOf(r.credential);
    const callerHere = credentialScheme === scheme || credentialScheme === 'either' ? caller : undefined;
    const deleteId = remove ? safeDecode(remove[1] as string) : undefined;
    return {
      request,
      sent: { request: r, caller: route === 'other' ? caller : callerHere, deleteId, route },
    };
  } catch {
    // Header values or methods the Fetch API refuses to build cannot arrive over HTTP either.
    return null;
  }
}

// ---------------------------------------------------------------- invariants

async function checkResponse(world: World, sent: Sent, response: Response, burst: boolean): Promise<void> {
  const v = (message: string) => world.violations.push(`${message} — request ${describe(sent.request)}`);
  const text = await response.text();
  const status = response.status;
  if (status >= 500) v(`status ${status}: ${text.slice(0, 200)}`);
  if (response.headers.get('x-content-type-options') !== 'nosniff')
    v(`status ${status} without X-Content-Type-Options: nosniff`);
  for (const name of ['server', 'x-powered-by'])
    if (response.headers.has(name)) v(`header ${name} names the stack`);
  if (!REQUEST_ID.test(response.headers.get('x-request-id') ?? '')) v('missing or odd X-Request-Id');
  const contentType = response.headers.get('content-type') ?? '';

  if (status >= 300) {
    if (!/^application\/json(;|$)/.test(contentType))
      v(`status ${status} with Content-Type "${contentType}"`);
    if (sent.request.method !== 'HEAD' && response.headers.get('content-length') !== '0') {
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        v(`status ${status} with a body that is not JSON: ${text.slice(0, 100)}`);
      }
      const keys = json && typeof json === 'object' ? Object.keys(json).sort().join(',') : '';
      const error = (json as { error?: unknown })?.error;
      if (
        keys !== 'error,result' ||
        (json as { result?: unknown }).result !== 'error' ||
        typeof error !== 'string' ||
        error.length === 0
      ) {
        v(`status ${status} without the error shape: ${text.slice(0, 100)}`);
      } else if (/\n\s+at /.test(error)) v('error sentence carries a stack trace');
    }
    if (status === 401 && !response.headers.has('www-authenticate')) v('401 without WWW-Authenticate');
  }

  // Nothing secret leaves, except the one secret a 201 has just made.
  let created: KnownKey | undefined;
  if (status === 201) {
    try {
      const json = JSON.parse(text);
      const k = json.apikey;
      created = {
        id: k.key,
        secret: k.secret,
        userId: k.userId,
        level: k.level,
        expiresAt: Date.parse(k.expiresAt),
        deleted: false,
      };
    } catch {
      v('201 whose body is not JSON');
    }
  }
  const exposed = text + JSON.stringify([...response.headers]);
  for (const k of world.known) {
    if (exposed.includes(k.secret)) v(`response carries the secret of ${k.id}`);
  }
  for (const [name, token] of world.pool.all) {
    const signature = token.split('.')[2] ?? '';
    if (exposed.includes(token) || (signature !== '' && exposed.includes(signature)))
      v(`response carries token ${name}`);
  }
  if (exposed.includes(FUZZ_JWT_SECRET)) v('response carries the JWT secret');

  if (status >= 200 && status < 300 && sent.route !== 'other' && !sent.caller)
    v(`status ${status} for a credential that must not authenticate`);
  if (status === 409 && !sent.caller) v('409 for a credential that must not authenticate');

  if (status === 201) {
    if (sent.route !== 'create') v('201 from something other than a create');
    if (!created) return;
    if (!KEY_ID.test(created.id)) v(`created key id "${created.id}" is not of the key format`);
    if (!/^[A-Za-z0-9_-]{43,}$/.test(created.secret)) v('created secret is not 43+ URL-safe characters');
    if (world.known.some((k) => k.id === created.id || k.secret === created.secret))
      v('created key or secret repeats an earlier one');
    if (response.headers.get('cache-control') !== 'no-store') v('201 without Cache-Control: no-store');
    if (sent.caller) {
      if (created.userId !== sent.caller.userId)
        v(`key created for user ${created.userId}, caller is ${sent.caller.userId}`);
      if (created.level > sent.caller.level)
        v(`level ${created.level} key created by a level ${sent.caller.level} caller`);
      if (!burst && world.liveKeysOf(sent.caller.userId) >= MAX_KEYS_PER_USER)
        v('201 beyond MAX_KEYS_PER_USER');
    }
    const b = sent.request.body;
    if (
      b.kind === 'create' &&
      (created.level !== b.level || created.expiresAt !== world.time.now + b.expiresIn * 1000)
    ) {
      v('created key does not carry the requested level and expiry');
    }
    world.known.push(created);
  }
  if (status === 204) {
    if (text !== '') v('204 with a body');
    const key = world.known.find((k) => k.id === sent.deleteId);
    if (sent.route !== 'delete' || !key) v('204 for no known key');
    else if (key.deleted) v(`204 for ${key.id}, already deleted`);
    else if (key.expiresAt <= world.time.now) v(`204 for expired key ${key.id}`);
    else if (sent.caller && (key.userId !== sent.caller.userId || key.level > sent.caller.level))
      v(`204: caller may not delete ${key.id}`);
    if (key) key.deleted = true;
  }
  if (status === 409 && sent.caller && !burst && world.liveKeysOf(sent.caller.userId) < MAX_KEYS_PER_USER)
    v('409 below MAX_KEYS_PER_USER');
}

/** The database holds exactly the keys acknowledged as created and not acknowledged as deleted. */
function checkDatabase(world: World): void {
  const rows = world.keygate.db.$client
    .query('SELECT id, secret_hash AS hash, user_id AS userId, level, expires_at AS expiresAt FROM api_keys')
    .all() as Array<{
    id: string;
    hash: Uint8Array;
    userId: number;
    level: number;
    expiresAt: number;
  }>;
  const expected = new Map(world.known.filter((k) => !k.deleted).map((k) => [k.id, k]));
  if (rows.length !== expected.size)
    world.violations.push(`database holds ${rows.length} keys, ${expected.size} acknowledged`);
  for (const row of rows) {
    const k = expected.get(row.id);
    if (!k) world.violations.push(`database holds ${row.id}, never acknowledged or acknowledged deleted`);
    else if (
      !Buffer.from(row.hash).equals(createHash('sha256').update(k.secret).digest()) ||
      row.userId !== k.userId ||
      row.level !== k.level ||
      row.expiresAt !== k.expiresAt
    ) {
      world.violations.push(`database row of ${row.id} differs from what was acknowledged`);
    }
  }
}

export function describe(r: FuzzRequest): string {
  const text = JSON.stringify(r, (_key, value) =>
    value instanceof Uint8Array
      ? `<${value.length} bytes>`
      : typeof value === 'string' && value.length > 80
        ? `${value.slice(0, 80)}…(${value.length})`
        : value,
  );
  return text.length > 600 ? `${text.slice(0, 600)}…` : text;
}

// ---------------------------------------------------------------- the property

/** Runs one sequence of steps on a fresh keygate; resolves with the violations found. */
export async function runSequence(steps: Step[], stats: FuzzStats): Promise<string[]> {
  const world = new World(await tokens());
  const exchange = async (r: FuzzRequest): Promise<{ sent: Sent; response: Response } | null> => {
    const built = buildRequest(world, r);
    if (!built) {
      stats.unsendable++;
      return null;
    }
    stats.requests++;
    try {
      const response = await world.keygate.handle(built.request);
      stats.statuses[response.status] = (stats.statuses[response.status] ?? 0) + 1;
      return { sent: built.sent, response };
    } catch (error) {
      world.violations.push(`handle rejected: ${String(error)} — request ${describe(r)}`);
      return null;
    }
  };
  try {
    for (const s of steps) {
      if (s.kind === 'tick') world.time.now += s.seconds * 1000;
      else if (s.kind === 'request') {
        const result = await exchange(s.request);
        if (result) await checkResponse(world, result.sent, result.response, false);
      } else {
        // All built against the same state, sent together (one group commit), judged in the order sent.
        const results = await Promise.all(s.requests.map(exchange));
        for (const result of results)
          if (result) await checkResponse(world, result.sent, result.response, true);
      }
    }
    await world.keygate.store.drained();
    checkDatabase(world);
  } finally {
    await world.keygate.close();
    world.logger.flush();
  }
  for (const chunk of world.logged) {
    for (const line of chunk.split('\n')) {
      if (!line.includes('"level":"error"')) continue;
      const { msg, error } = JSON.parse(line) as { msg: string; error?: string };
      world.violations.push(`logged "${msg}": ${String(error).split('\n')[0]?.slice(0, 200)}`);
    }
  }
  return world.violations;
}

export const sequence = fc.array(step, { minLength: 1, maxLength: 40 });

/** The property: no sequence of hostile requests breaks an invariant. */
export function hostileHttpProperty(stats: FuzzStats, onViolations?: (violations: string[]) => void) {
  return fc.asyncProperty(sequence, async (steps) => {
    const violations = await runSequence(steps, stats);
    if (onViolations) onViolations(violations);
    else if (violations.length > 0) throw new Error(violations.slice(0, 5).join('\n'));
  });
}
