// Hostile HTTP input, defined once: the generators of random and mutated requests, the model of what
// was acknowledged, and the invariants every response must keep. test/fuzz/*.test.ts runs it briefly
// on every `bun test`; scripts/experiments/fuzz.ts runs the same property for as many requests as asked.

import type { Database } from 'bun:sqlite';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { SignJWT } from 'jose';
import { type Config, loadConfig } from '../../src/config';
import { createLogger, type Logger } from '../../src/core/log';
import { createKeygate, type Keygate } from '../../src/keygate';
import { sqliteOf } from '../support/raw-query';

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
  | {
      kind: 'key';
      ref: number;
      form: 'basic' | 'headers';
      secret: 'own' | 'other' | 'truncated' | 'flipped';
      /** Pick among the keys still live (else among all ever acknowledged). */
      live?: boolean;
    }
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
  | { kind: 'huge'; size: number; inName: boolean }
  | { kind: 'verify'; subject: VerifySubject; minLevel: number | string | undefined }
  | { kind: 'rotate'; gracePeriod: number | string | undefined };

/** What a verify body asks about, in the model's terms; 'both' and 'neither' are malformed (400). */
export type VerifySubject =
  | { kind: 'key'; ref: number; secret: 'own' | 'other' | 'flipped'; keyText: 'known' | 'unknown' | 'odd' }
  | { kind: 'token'; name: TokenName }
  | { kind: 'both' }
  | { kind: 'neither' };

export type Target =
  | { kind: 'create'; scheme: Scheme }
  | { kind: 'delete'; scheme: Scheme; id: DeleteId }
  | { kind: 'path'; path: string }
  | { kind: 'verify' }
  | { kind: 'forward-auth'; tail: string; minLevel: string | null }
  | { kind: 'list'; scheme: Scheme; limit: string | null; cursor: CursorChoice }
  | { kind: 'get'; scheme: Scheme; id: DeleteId }
  | { kind: 'rotate'; scheme: Scheme; id: DeleteId };

/** A list cursor: none, one keygate handed out earlier in the sequence, or a forged one. */
export type CursorChoice = { kind: 'none' } | { kind: 'seen'; ref: number } | { kind: 'raw'; value: string };

export type DeleteId =
  | { kind: 'known'; ref: number }
  /** The key the credential itself uses, or for a token one of its user's live keys. */
  | { kind: 'self' }
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

const levelText = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 8 }).map(String) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('', '9', '-1', '1.5', '01', '+1', '1e0', ' 1', 'x', '%00', '8&minLevel=0'),
  },
);

const verifyBody = (): fc.Arbitrary<Body> =>
  fc.record({
    kind: fc.constant('verify' as const),
    subject: fc.oneof(
      {
        weight: 5,
        arbitrary: fc.record({
          kind: fc.constant('key' as const),
          ref: fc.nat(),
          secret: fc.constantFrom<'own' | 'other' | 'flipped'>('own', 'own', 'other', 'flipped'),
          keyText: fc.constantFrom<'known' | 'unknown' | 'odd'>('known', 'known', 'known', 'unknown', 'odd'),
        }),
      },
      { weight: 4, arbitrary: tokenName.map((name) => ({ kind: 'token', name }) as VerifySubject) },
      { weight: 1, arbitrary: fc.constantFrom<VerifySubject>({ kind: 'both' }, { kind: 'neither' }) },
    ),
    minLevel: fc.oneof(
      { weight: 3, arbitrary: fc.constant(undefined) },
      { weight: 3, arbitrary: fc.integer({ min: 0, max: 8 }) },
      { weight: 1, arbitrary: fc.constantFrom<number | string>(9, -1, 1.5, '3', 'x') },
    ),
  });

const rotateBody: fc.Arbitrary<Body> = fc.record({
  kind: fc.constant('rotate' as const),
  gracePeriod: fc.oneof(
    { weight: 3, arbitrary: fc.constant(undefined) },
    { weight: 3, arbitrary: fc.constant(0) },
    { weight: 3, arbitrary: fc.integer({ min: 1, max: 10 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 2_592_000 }) },
    { weight: 1, arbitrary: fc.constantFrom<number | string>(2_592_001, -1, 1.5, '5', 'x') },
  ),
});

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
          live: fc.boolean(),
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

const newRouteTarget: fc.Arbitrary<Target> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ kind: 'verify' } as Target) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('forward-auth' as const),
      tail: fc.oneof(
        { weight: 3, arbitrary: fc.constant('') },
        { weight: 2, arbitrary: fc.constantFrom('/app', '/admin/report', '/a/b/c', '/kg_x/jwt') },
        { weight: 1, arbitrary: rawSegment.map((segment) => `/${segment}`) },
      ),
      minLevel: fc.option(levelText, { nil: null }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('list' as const),
      scheme: fc.constantFrom<Scheme>('jwt', 'key'),
      limit: fc.option(
        fc.oneof(
          fc.integer({ min: 1, max: 3 }).map(String),
          fc.constantFrom('1', '50', '100', '101', '0', '-1', '1.5', 'x', '', '1e1'),
        ),
        { nil: null },
      ),
      cursor: fc.oneof(
        { weight: 3, arbitrary: fc.constant({ kind: 'none' } as CursorChoice) },
        { weight: 3, arbitrary: fc.nat().map((ref) => ({ kind: 'seen', ref }) as CursorChoice) },
        {
          weight: 1,
          arbitrary: fc
            .oneof(
              fc.string({ maxLength: 40 }),
              fc.constantFrom('', 'null', 'AAAA', '%00', 'eyJhIjoxfQ', '____', 'kg_aaaaaaaaaaaaaaaaaaaaaa'),
            )
            .map((value) => ({ kind: 'raw', value }) as CursorChoice),
        },
      ),
    }),
  },
  ...(['get', 'rotate'] as const).map((kind) => ({
    weight: kind === 'rotate' ? 3 : 2,
    arbitrary: fc.record({
      kind: fc.constant(kind),
      scheme: fc.constantFrom<Scheme>('jwt', 'key'),
      id: fc.oneof(
        { weight: 3, arbitrary: fc.record({ kind: fc.constant('known' as const), ref: fc.nat() }) },
        { weight: 4, arbitrary: fc.constant({ kind: 'self' } as DeleteId) },
        { weight: 1, arbitrary: fc.constant({ kind: 'unknown' } as DeleteId) },
        { weight: 1, arbitrary: rawSegment.map((segment) => ({ kind: 'raw', segment }) as DeleteId) },
      ),
    }) as fc.Arbitrary<Target>,
  })),
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

const bodyFor = (t: Target): fc.Arbitrary<Body> => {
  const none = fc.constant({ kind: 'none' } as Body);
  switch (t.kind) {
    case 'delete':
    case 'get':
    case 'list':
    case 'forward-auth':
      return fc.oneof({ weight: 6, arbitrary: none }, { weight: 1, arbitrary: body });
    case 'verify':
      return fc.oneof({ weight: 8, arbitrary: verifyBody() }, { weight: 2, arbitrary: body });
    case 'rotate':
      return fc.oneof(
        { weight: 4, arbitrary: rotateBody },
        { weight: 3, arbitrary: none },
        { weight: 1, arbitrary: body },
      );
    default:
      return body;
  }
};

/** Forward-auth reads either scheme; verify takes no caller credential (it is sent anyway, sometimes). */
const credentialFor = (t: Target): fc.Arbitrary<Credential> => {
  if (t.kind === 'path' || t.kind === 'verify') return credential('jwt');
  if (t.kind === 'forward-auth') return fc.oneof(credential('jwt'), credential('key'));
  return credential(t.scheme);
};

export const fuzzRequest: fc.Arbitrary<FuzzRequest> = fc
  .oneof({ weight: 11, arbitrary: target }, { weight: 13, arbitrary: newRouteTarget })
  .chain((t) =>
    fc.record({
      method,
      target: fc.constant(t),
      query: fc.oneof(
        { weight: 8, arbitrary: fc.constant('') },
        {
          weight: 1,
          arbitrary: fc.constantFrom('?', '?a=1&a=2', '?%zz', '?__proto__[x]=1', '?key=kg_x#frag'),
        },
      ),
      credential: credentialFor(t),
      body: bodyFor(t),
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
  name: string;
  expiresAt: number;
  deleted: boolean;
  /** Rotated out with no grace period: the store may have removed the row or kept it expired. */
  rotatedAway?: boolean;
};
type Caller = { userId: number; level: number };

export type FuzzStats = {
  requests: number;
  unsendable: number;
  statuses: Record<number, number>;
  /** Statuses per route the request reached (create, delete, verify, forward-auth, list, get, rotate, other). */
  routes: Record<string, Record<number, number>>;
};

export function newStats(): FuzzStats {
  return { requests: 0, unsendable: 0, statuses: {}, routes: {} };
}

class World {
  readonly time = { now: T0 };
  readonly logged: string[] = [];
  keygate!: Keygate;
  readonly known: KnownKey[] = [];
  readonly violations: string[] = [];
  readonly cursors: string[] = [];
  readonly logger: Logger;

  constructor(readonly pool: TokenPool) {
    const config = loadConfig({
      DATABASE_URL: ':memory:',
      JWT_SECRET: FUZZ_JWT_SECRET,
      MAX_KEYS_PER_USER: String(MAX_KEYS_PER_USER),
    });
    // Only warnings and errors are kept: an "unexpected error" line is a violation on its own.
    this.logger = createLogger('warn', (chunk) => this.logged.push(chunk));
    this.config = config;
  }

  private readonly config: Config;

  /** Opens the world's keygate (the store opens asynchronously). */
  async open(): Promise<this> {
    this.keygate = await createKeygate(this.config, {
      jwtSecret: FUZZ_JWT_SECRET,
      logger: this.logger,
      clock: () => this.time.now,
    });
    return this;
  }

  liveKeysOf(userId: number): number {
    return this.known.filter((k) => this.isLive(k) && k.userId === userId).length;
  }

  isLive(k: KnownKey): boolean {
    return !k.deleted && k.expiresAt > this.time.now;
  }

  pick(ref: number): KnownKey | undefined {
    return this.known.length === 0 ? undefined : this.known[ref % this.known.length];
  }

  pickLive(ref: number): KnownKey | undefined {
    const live = this.known.filter((k) => this.isLive(k));
    return live.length === 0 ? undefined : live[ref % live.length];
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
      const key = c.kind === 'key' ? (c.live ? world.pickLive(c.ref) : world.pick(c.ref)) : undefined;
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

function bodyBytes(world: World, b: Body): string | Uint8Array | undefined {
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
    case 'verify':
    case 'rotate':
      return JSON.stringify(structuredBody(world, b));
  }
}

/** The JSON object a verify or rotate body stands for (undefined properties are left out). */
function structuredBody(world: World, b: Extract<Body, { kind: 'verify' | 'rotate' }>): object {
  if (b.kind === 'rotate') return { gracePeriod: b.gracePeriod };
  const s = b.subject;
  const subject =
    s.kind === 'token'
      ? { token: world.pool.all.get(s.name) }
      : s.kind === 'both'
        ? { key: NEVER_CREATED, secret: 'A'.repeat(43), token: world.pool.all.get('user1') }
        : s.kind === 'neither'
          ? {}
          : verifyKeySubject(world, s);
  return { ...subject, minLevel: b.minLevel };
}

function verifyKeySubject(world: World, s: Extract<VerifySubject, { kind: 'key' }>) {
  const key = world.pick(s.ref);
  const id =
    s.keyText === 'odd' ? 'not-a-key' : s.keyText === 'unknown' ? NEVER_CREATED : (key?.id ?? NEVER_CREATED);
  const own = key?.secret ?? 'A'.repeat(43);
  const secret =
    s.secret === 'own'
      ? own
      : s.secret === 'other'
        ? (world.known.find((k) => k.id !== key?.id)?.secret ?? 'B'.repeat(43))
        : `${own.slice(0, -1)}${own.endsWith('A') ? 'B' : 'A'}`;
  return { key: id, secret };
}

type Route = 'create' | 'delete' | 'verify' | 'forward-auth' | 'list' | 'get' | 'rotate' | 'other';

/** What verify must answer, from the model at the moment the request was built. */
type VerifyExpectation =
  | { kind: 'malformed' }
  | {
      kind: 'answer';
      /** The codes the model allows (an expired key rotated out may already be gone: two codes). */
      codes: string[];
      principal?: { type: 'key' | 'jwt'; userId: number; level: number; key?: string };
    };

type Sent = {
  request: FuzzRequest;
  caller: Caller | null | undefined;
  /** The decoded :id of delete, get and rotate. */
  id: string | undefined;
  url: URL;
  /**
   * What the request turned out to be once the URL was normalised (`/apikeys/./jwt` is a create).
   * Paths are strict: a trailing slash is another path (404).
   */
  route: Route;
  /** Forward-auth: the level the query asks for (the strictest of repeated values), or 'bad'. */
  minLevel: number | 'bad';
  /** The request as a well-behaved client sends it: no odd method, query, header or Content-Type. */
  clean: boolean;
  verify: VerifyExpectation | undefined;
  /** Rotate: the grace period the body asks for (seconds), or undefined when the body is odd. */
  grace: number | undefined;
  /** The key the request is about, as the model knew it when the request was built. */
  target: { key: KnownKey; live: boolean; expiresAt: number } | undefined;
};

const ROUTES: Array<[Route, string, RegExp]> = [
  ['create', 'POST', /^\/apikeys\/(jwt|key)$/],
  ['list', 'GET', /^\/apikeys\/(jwt|key)$/],
  ['verify', 'POST', /^\/apikeys\/verify$/],
  ['delete', 'DELETE', /^\/apikeys\/([^/]+)\/(jwt|key)$/],
  ['get', 'GET', /^\/apikeys\/([^/]+)\/(jwt|key)$/],
  ['rotate', 'POST', /^\/apikeys\/([^/]+)\/rotate\/(jwt|key)$/],
];
const FORWARD_AUTH_ROUTE = /^\/forward-auth(\/.+)?$/;

function routeOf(method: string, pathname: string): { route: Route; scheme?: string; id?: string } {
  if (FORWARD_AUTH_ROUTE.test(pathname)) return { route: 'forward-auth' };
  for (const [route, routeMethod, pattern] of ROUTES) {
    const match = method === routeMethod ? pattern.exec(pathname) : null;
    if (!match) continue;
    if (match.length === 2) return { route, scheme: match[1] };
    return { route, id: safeDecode(match[1] as string), scheme: match[2] };
  }
  return { route: 'other' };
}

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

/** The key a credential speaks with, or for a valid token one of its user's live keys. */
function ownKeyOf(world: World, c: Credential): string {
  if (c.kind === 'key') return (c.live ? world.pickLive(c.ref) : world.pick(c.ref))?.id ?? NEVER_CREATED;
  const user = c.kind === 'token' ? world.pool.valid.get(c.name)?.userId : undefined;
  return world.known.find((k) => k.userId === user && world.isLive(k))?.id ?? NEVER_CREATED;
}

function pathOf(world: World, r: FuzzRequest): { path: string; method: string } {
  const t = r.target;
  const idSegment = (id: DeleteId) =>
    id.kind === 'known'
      ? (world.pick(id.ref)?.id ?? NEVER_CREATED)
      : id.kind === 'self'
        ? ownKeyOf(world, r.credential)
        : id.kind === 'unknown'
          ? NEVER_CREATED
          : id.segment;
  switch (t.kind) {
    case 'create':
      return { path: `/apikeys/${t.scheme}`, method: 'POST' };
    case 'delete':
      return { path: `/apikeys/${idSegment(t.id)}/${t.scheme}`, method: 'DELETE' };
    case 'get':
      return { path: `/apikeys/${idSegment(t.id)}/${t.scheme}`, method: 'GET' };
    case 'rotate':
      return { path: `/apikeys/${idSegment(t.id)}/rotate/${t.scheme}`, method: 'POST' };
    case 'verify':
      return { path: '/apikeys/verify', method: 'POST' };
    case 'forward-auth':
      return {
        path: `/forward-auth${t.tail}${t.minLevel === null ? '' : `?minLevel=${t.minLevel}`}`,
        method: 'GET',
      };
    case 'list': {
      const query = new URLSearchParams();
      if (t.limit !== null) query.set('limit', t.limit);
      const cursor =
        t.cursor.kind === 'raw'
          ? t.cursor.value
          : t.cursor.kind === 'seen' && world.cursors.length > 0
            ? world.cursors[t.cursor.ref % world.cursors.length]
            : undefined;
      if (cursor !== undefined) query.set('cursor', cursor);
      const text = query.toString();
      return { path: `/apikeys/${t.scheme}${text === '' ? '' : `?${text}`}`, method: 'GET' };
    }
    case 'path':
      return { path: t.path, method: 'GET' };
  }
}

/** The level forward-auth's query asks for: the highest minLevel; 'bad' when any is not 0..8 (400). */
function minLevelOf(url: URL): number | 'bad' {
  const values = url.searchParams.getAll('minLevel');
  if (values.some((value) => !/^[0-8]$/.test(value))) return 'bad';
  return Math.max(0, ...values.map(Number));
}

function verifyExpectation(world: World, b: Body): VerifyExpectation | undefined {
  if (b.kind !== 'verify') return undefined;
  const s = b.subject;
  const minLevelOk =
    b.minLevel === undefined ||
    (Number.isInteger(b.minLevel) && Number(b.minLevel) >= 0 && Number(b.minLevel) <= 8);
  if (s.kind === 'both' || s.kind === 'neither' || !minLevelOk) return { kind: 'malformed' };
  const minLevel = (b.minLevel as number | undefined) ?? 0;
  const allowed = (principal: NonNullable<Extract<VerifyExpectation, { kind: 'answer' }>['principal']>) => ({
    kind: 'answer' as const,
    codes: [principal.level >= minLevel ? 'VALID' : 'INSUFFICIENT_LEVEL'],
    principal,
  });
  if (s.kind === 'token') {
    const valid = world.pool.valid.get(s.name);
    return valid
      ? allowed({ type: 'jwt', userId: valid.userId, level: valid.level })
      : { kind: 'answer', codes: ['INVALID_TOKEN'] };
  }
  const key = s.keyText === 'known' ? world.pick(s.ref) : undefined;
  if (!key || s.secret !== 'own' || key.deleted) return { kind: 'answer', codes: ['NOT_FOUND'] };
  if (key.expiresAt <= world.time.now)
    return { kind: 'answer', codes: key.rotatedAway ? ['EXPIRED', 'NOT_FOUND'] : ['EXPIRED'] };
  return allowed({ type: 'key', userId: key.userId, level: key.level, key: key.id });
}

/** Rotate's grace period in seconds as the body asks for it; undefined when the body is not one keygate accepts. */
function graceOf(request: FuzzRequest): number | undefined {
  const b = request.body;
  if (b.kind === 'none') return 0;
  if (b.kind !== 'rotate') return undefined;
  if (b.gracePeriod === undefined) return 0;
  return Number.isInteger(b.gracePeriod) && Number(b.gracePeriod) >= 0 && Number(b.gracePeriod) <= 2_592_000
    ? Number(b.gracePeriod)
    : undefined;
}

function buildRequest(world: World, r: FuzzRequest): { request: Request; sent: Sent } | null {
  const headers = new Headers();
  try {
    const { path, method: defaultMethod } = pathOf(world, r);
    const caller = applyCredential(world, r.credential, headers);
    for (const value of r.contentType ?? []) headers.append('content-type', value);
    for (const [name, value] of r.headers) headers.append(name, value);
    const method = r.method ?? defaultMethod;
    const payload = bodyBytes(world, r.body);
    const request = new Request(`http://localhost${path}${r.query}`, {
      method,
      headers,
      body: method === 'GET' || method === 'HEAD' ? undefined : payload,
    });
    const url = new URL(request.url);
    const { route, scheme, id } = routeOf(request.method, url.pathname);
    // A credential of the other scheme is no credential at all for this route; forward-auth reads both.
    const credentialScheme = schemeOf(r.credential);
    const callerHere =
      route === 'other' ||
      route === 'forward-auth' ||
      credentialScheme === scheme ||
      credentialScheme === 'either'
        ? caller
        : undefined;
    const known = id === undefined ? undefined : world.known.find((k) => k.id === id);
    // Bodies over 16 KiB meet the 413 before any route.
    const small =
      payload === undefined || (typeof payload === 'string' ? payload.length * 3 : payload.length) <= 16_384;
    const clean =
      small &&
      r.method === null &&
      r.query === '' &&
      r.headers.length === 0 &&
      (payload === undefined
        ? r.contentType === null || r.contentType.length <= 1
        : r.contentType?.join() === 'application/json');
    return {
      request,
      sent: {
        request: r,
        caller: route === 'verify' ? undefined : callerHere,
        id,
        url,
        route,
        minLevel: minLevelOf(url),
        clean,
        verify: route === 'verify' ? verifyExpectation(world, r.body) : undefined,
        grace: route === 'rotate' ? graceOf(r) : undefined,
        target: known && { key: known, live: world.isLive(known), expiresAt: known.expiresAt },
      },
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
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  let created: KnownKey | undefined;
  if (status === 201) {
    const k = (json as { apikey?: Record<string, unknown> } | undefined)?.apikey;
    if (!k) v('201 whose body is not JSON with an apikey');
    else
      created = {
        id: k.key as string,
        secret: k.secret as string,
        userId: k.userId as number,
        level: k.level as number,
        name: k.name as string,
        expiresAt: Date.parse(k.expiresAt as string),
        deleted: false,
      };
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

  const authenticated = sent.route !== 'other' && sent.route !== 'verify';
  if (status >= 200 && status < 300 && authenticated && !sent.caller)
    v(`status ${status} for a credential that must not authenticate`);
  if (status === 409 && !sent.caller) v('409 for a credential that must not authenticate');

  if (sent.route === 'verify') checkVerify(world, sent, status, json, response.headers, burst, v);
  if (sent.route === 'forward-auth') checkForwardAuth(sent, status, json, response.headers, burst, v);
  if (sent.route === 'list' && status === 200) checkList(world, sent, json, burst, v);
  if (sent.route === 'get' && status === 200) checkGet(world, sent, json, burst, v);

  if (status === 201) {
    if (sent.route !== 'create' && sent.route !== 'rotate')
      v('201 from something other than a create or rotate');
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
      const adds = sent.route === 'create' || (sent.grace ?? 1) > 0;
      if (!burst && adds && world.liveKeysOf(sent.caller.userId) >= MAX_KEYS_PER_USER)
        v('201 beyond MAX_KEYS_PER_USER');
    }
    const b = sent.request.body;
    if (
      sent.route === 'create' &&
      b.kind === 'create' &&
      (created.level !== b.level || created.expiresAt !== world.time.now + b.expiresIn * 1000)
    ) {
      v('created key does not carry the requested level and expiry');
    }
    if (sent.route === 'rotate') checkRotated(world, sent, created, json, burst, v);
    world.known.push(created);
  }
  if (status === 204) {
    if (text !== '') v('204 with a body');
    const key = world.known.find((k) => k.id === sent.id);
    if (sent.route !== 'delete' || !key) v('204 for no known key');
    else if (key.deleted) v(`204 for ${key.id}, already deleted`);
    else if (key.expiresAt <= world.time.now && !(burst && key.rotatedAway))
      v(`204 for expired key ${key.id}${burst ? ' (burst)' : ''}`);
    else if (sent.caller && (key.userId !== sent.caller.userId || key.level > sent.caller.level))
      v(`204: caller may not delete ${key.id}`);
    if (key) key.deleted = true;
  }
  if (status === 409 && sent.route === 'rotate' && sent.grace === 0)
    v('409 for a rotation without grace period');
  if (status === 409 && sent.caller && !burst && world.liveKeysOf(sent.caller.userId) < MAX_KEYS_PER_USER)
    v('409 below MAX_KEYS_PER_USER');
}

type Report = (message: string) => void;
const VERIFY_CODES = ['VALID', 'NOT_FOUND', 'EXPIRED', 'INVALID_TOKEN', 'INSUFFICIENT_LEVEL'];

/** Verify: 200 for every well-formed body; VALID only for what authenticates; the principal as modelled. */
function checkVerify(
  world: World,
  sent: Sent,
  status: number,
  json: unknown,
  headers: Headers,
  burst: boolean,
  v: Report,
): void {
  const expected = sent.verify;
  if (sent.clean && expected?.kind === 'answer' && status !== 200)
    v(`verify of a well-formed body answered ${status}`);
  if (sent.clean && expected?.kind === 'malformed' && status !== 400)
    v(`verify of a malformed body answered ${status}`);
  if (status !== 200) return;
  if (headers.get('cache-control') !== 'no-store') v('verify 200 without Cache-Control: no-store');
  const answer = json as {
    result?: unknown;
    valid?: unknown;
    code?: unknown;
    principal?: Record<string, unknown>;
  };
  if (
    answer?.result !== 'success' ||
    typeof answer.valid !== 'boolean' ||
    !VERIFY_CODES.includes(String(answer.code))
  ) {
    v(`verify answered ${JSON.stringify(answer).slice(0, 200)}`);
    return;
  }
  if (answer.valid !== (answer.code === 'VALID')) v(`verify: valid ${answer.valid} with code ${answer.code}`);
  if (expected?.kind !== 'answer') {
    v(`verify answered 200 for a body the model calls malformed`);
    return;
  }
  // In a burst another request may delete the key first: VALID may turn NOT_FOUND, never the reverse.
  const codes = burst && expected.codes.includes('VALID') ? [...expected.codes, 'NOT_FOUND'] : expected.codes;
  if (!codes.includes(answer.code as string))
    v(`verify answered ${answer.code}, the model expects ${codes.join(' or ')}`);
  if (answer.code === 'VALID' || answer.code === 'INSUFFICIENT_LEVEL') {
    const p = answer.principal;
    const want = expected.principal;
    if (
      !p ||
      !want ||
      p.type !== want.type ||
      p.userId !== want.userId ||
      p.level !== want.level ||
      p.key !== want.key
    )
      v(`verify principal ${JSON.stringify(p)} differs from the model's ${JSON.stringify(want)}`);
    if (p && 'secret' in p) v('verify principal carries a secret');
    if (p && typeof p.expiresAt !== 'string') v('verify principal without expiresAt');
    if (
      want?.type === 'key' &&
      world.known.find((k) => k.id === want.key)?.expiresAt !== Date.parse(String(p?.expiresAt))
    )
      v('verify principal expiresAt differs from the key expiry');
  }
}

/** Forward-auth: 200 only for a credential that authenticates at the asked level, with its identity headers. */
function checkForwardAuth(
  sent: Sent,
  status: number,
  json: unknown,
  headers: Headers,
  burst: boolean,
  v: Report,
): void {
  const c = sent.caller;
  if (status === 200) {
    if (!c) return; // reported above
    if (sent.minLevel === 'bad') v('forward-auth allowed with a malformed minLevel');
    else if (c.level < sent.minLevel)
      v(`forward-auth allowed level ${c.level} below minLevel ${sent.minLevel}`);
    const auth = sent.request.credential.kind === 'key' ? 'key' : 'jwt';
    if (headers.get('x-keygate-user-id') !== String(c.userId))
      v('forward-auth X-Keygate-User-Id differs from the caller');
    if (headers.get('x-keygate-level') !== String(c.level))
      v('forward-auth X-Keygate-Level differs from the caller');
    if (headers.get('x-keygate-auth') !== auth) v(`forward-auth X-Keygate-Auth is not ${auth}`);
    if (headers.has('x-keygate-key') !== (auth === 'key'))
      v('forward-auth X-Keygate-Key present for a token or absent for a key');
    if (Number.isNaN(Date.parse(headers.get('x-keygate-expires-at') ?? '')))
      v('forward-auth without X-Keygate-Expires-At');
    if (headers.get('cache-control') !== 'no-store') v('forward-auth 200 without Cache-Control: no-store');
    const principal = (json as { principal?: Record<string, unknown> } | undefined)?.principal;
    if (sent.request.method !== 'HEAD' && (principal?.userId !== c.userId || principal?.level !== c.level))
      v('forward-auth principal differs from the caller');
  }
  if (status === 401) {
    const challenge = headers.get('www-authenticate') ?? '';
    if (!/Bearer/.test(challenge) || !/Basic/.test(challenge)) v(`forward-auth 401 challenge "${challenge}"`);
  }
  // The plain cases, exactly: a well-behaved proxy's request must get the one right answer.
  if (!sent.clean || burst || sent.minLevel === 'bad') return;
  const kind = sent.request.credential.kind;
  if (kind !== 'none' && kind !== 'token' && kind !== 'key' && kind !== 'unknown-key') return;
  const want = c === undefined ? 401 : c === null || c.level < sent.minLevel ? 403 : 200;
  if (status !== want) v(`forward-auth answered ${status}, the model expects ${want}`);
}

// The fuzzer's keys carry no meta, rate limit or credits: key info has its always-present fields only.
const LIST_ITEM_FIELDS = 'createdAt,enabled,expiresAt,key,lastUsedAt,level,name,userId';

/** List: only the caller's own live keys at or below its level, no secret; all of them on one full page. */
function checkList(world: World, sent: Sent, json: unknown, burst: boolean, v: Report): void {
  const c = sent.caller;
  const page = json as { result?: unknown; apikeys?: unknown; nextCursor?: unknown };
  if (!c || page?.result !== 'success' || !Array.isArray(page.apikeys)) {
    v(`list answered ${JSON.stringify(page).slice(0, 200)}`);
    return;
  }
  if (typeof page.nextCursor === 'string') world.cursors.push(page.nextCursor);
  else if (page.nextCursor !== null) v('list nextCursor neither a string nor null');
  const seen = new Set<string>();
  for (const item of page.apikeys as Array<Record<string, unknown>>) {
    if (Object.keys(item).sort().join() !== LIST_ITEM_FIELDS)
      v(`list item fields ${Object.keys(item).sort().join()}`);
    const k = world.known.find((known) => known.id === item.key);
    if (!k) v('list shows a key never acknowledged');
    else if (k.userId !== c.userId) v(`list shows user ${k.userId}'s key to user ${c.userId}`);
    else if (k.level > c.level) v(`list shows a level ${k.level} key to a level ${c.level} caller`);
    else if (!burst && !world.isLive(k)) v('list shows a deleted or expired key');
    else if (
      item.level !== k.level ||
      item.name !== k.name ||
      // In a burst a rotation sent alongside may shorten the key after the list read it.
      (!burst && Date.parse(String(item.expiresAt)) !== k.expiresAt)
    )
      v('list item differs from the key as acknowledged');
    if (seen.has(String(item.key))) v('list shows a key twice');
    seen.add(String(item.key));
  }
  // A first page large enough for everything must hold exactly the keys the model says are visible.
  const query = sent.url.searchParams;
  const limit = query.has('limit') ? Number(query.get('limit')) : 50;
  if (burst || !sent.clean || query.has('cursor') || !(limit >= MAX_KEYS_PER_USER)) return;
  const visible = world.known.filter((k) => world.isLive(k) && k.userId === c.userId && k.level <= c.level);
  if (visible.length !== seen.size || visible.some((k) => !seen.has(k.id)))
    v(`list shows ${seen.size} keys, the model ${visible.length}`);
}

/** Get: the caller's own live key at or below its level, as acknowledged. */
function checkGet(world: World, sent: Sent, json: unknown, burst: boolean, v: Report): void {
  const c = sent.caller;
  const item = (json as { apikey?: Record<string, unknown> } | undefined)?.apikey;
  const k = world.known.find((known) => known.id === sent.id);
  if (!c || !item) {
    v(`get answered ${JSON.stringify(json).slice(0, 200)}`);
    return;
  }
  if (Object.keys(item).sort().join() !== LIST_ITEM_FIELDS)
    v(`get fields ${Object.keys(item).sort().join()}`);
  if (!k || item.key !== k.id) v('get answered another or an unknown key');
  else if (k.userId !== c.userId) v(`get shows user ${k.userId}'s key to user ${c.userId}`);
  else if (k.level > c.level) v(`get shows a level ${k.level} key to a level ${c.level} caller`);
  else if (!burst && !world.isLive(k)) v('get shows a deleted or expired key');
  else if (
    item.level !== k.level ||
    item.name !== k.name ||
    // In a burst a rotation sent alongside may shorten the key after the get read it.
    (Date.parse(String(item.expiresAt)) !== k.expiresAt &&
      !(burst && Date.parse(String(item.expiresAt)) === sent.target?.expiresAt))
  )
    v(
      `get shows ${JSON.stringify(item)}, acknowledged ${JSON.stringify({ ...k, secret: undefined })}${burst ? ' (burst)' : ''}`,
    );
}

/** Rotate: the new key copies the old one; the old key's expiry is min(expiry, now + grace); the model follows. */
function checkRotated(
  world: World,
  sent: Sent,
  created: KnownKey,
  json: unknown,
  burst: boolean,
  v: Report,
): void {
  const c = sent.caller;
  const target = sent.target;
  const previous = (json as { previous?: { key?: unknown; expiresAt?: unknown } }).previous;
  if (!target || !c) {
    v('rotate 201 for a key the model does not know');
    return;
  }
  const old = target.key;
  if (!burst && !target.live) v(`rotate 201 for a deleted or expired key ${old.id}`);
  if (old.userId !== c.userId || old.level > c.level) v(`rotate 201: caller may not rotate ${old.id}`);
  if (
    created.userId !== old.userId ||
    created.level !== old.level ||
    created.name !== old.name ||
    created.expiresAt !== old.expiresAt
  )
    v('rotated key does not copy name, level, user and expiry');
  const previousExpiry = Date.parse(String(previous?.expiresAt));
  if (previous?.key !== old.id || Number.isNaN(previousExpiry)) {
    v(`rotate previous ${JSON.stringify(previous)}`);
    return;
  }
  if (
    sent.grace !== undefined &&
    previousExpiry !== Math.min(old.expiresAt, world.time.now + sent.grace * 1000)
  )
    v(`rotate shortened the old key to ${previous.expiresAt}, not min(expiry, now + ${sent.grace} s)`);
  if (previousExpiry > old.expiresAt) v('rotate lengthened the old key');
  old.expiresAt = previousExpiry;
  if (previousExpiry <= world.time.now) old.rotatedAway = true;
}

/** The database holds exactly the keys acknowledged as created and not acknowledged as deleted. */
function checkDatabase(world: World): void {
  const rows = (sqliteOf(world.keygate) as Database)
    .query('SELECT id, secret_hash AS hash, user_id AS userId, level, expires_at AS expiresAt FROM api_keys')
    .all() as Array<{
    id: string;
    hash: Uint8Array;
    userId: number;
    level: number;
    expiresAt: number;
  }>;
  const expected = new Map(world.known.filter((k) => !k.deleted).map((k) => [k.id, k]));
  // A key rotated out without grace period may be removed or kept expired; either is whole.
  const present = new Set(rows.map((row) => row.id));
  const required = [...expected.values()].filter((k) => !k.rotatedAway || present.has(k.id)).length;
  if (rows.length !== required)
    world.violations.push(`database holds ${rows.length} keys, ${required} acknowledged`);
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
  const world = await new World(await tokens()).open();
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
      stats.routes[built.sent.route] ??= {};
      const byRoute = stats.routes[built.sent.route] as Record<number, number>;
      byRoute[response.status] = (byRoute[response.status] ?? 0) + 1;
      return { sent: built.sent, response };
    } catch (error) {
      world.violations.push(`handle rejected: ${String(error)} — request ${describe(r)}`);
      return null;
    }
  };
  try {
    // A few live keys to start from, so list, get and rotate meet real keys early in a sequence.
    for (const s of SEED_STEPS) {
      const result = await exchange(s);
      if (result) await checkResponse(world, result.sent, result.response, false);
    }
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

const seedKey = (name: TokenName, level: number): FuzzRequest => ({
  method: null,
  target: { kind: 'create', scheme: 'jwt' },
  query: '',
  credential: { kind: 'token', name },
  body: { kind: 'create', name: `seed ${name} ${level}`, level, expiresIn: 3600 },
  contentType: ['application/json'],
  headers: [],
});
const SEED_STEPS: FuzzRequest[] = [seedKey('user1', 8), seedKey('user1', 2), seedKey('user2', 5)];

export const sequence = fc.array(step, { minLength: 1, maxLength: 40 });

/** The property: no sequence of hostile requests breaks an invariant. */
export function hostileHttpProperty(stats: FuzzStats, onViolations?: (violations: string[]) => void) {
  return fc.asyncProperty(sequence, async (steps) => {
    const violations = await runSequence(steps, stats);
    if (onViolations) onViolations(violations);
    else if (violations.length > 0) throw new Error(violations.slice(0, 5).join('\n'));
  });
}
