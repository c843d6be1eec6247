// Hostile values for a key's settings and the routes around them, defined once: create bodies with
// meta, enabled, ratelimit and credits; PATCH /apikeys/:id/{jwt,key}; GET /apikeys/:id/usage/{jwt,key};
// verify with a cost; forward-auth of limited keys. Values are written as raw JSON text, so they can be
// huge or odd numbers, wrong types, deep or large meta, unicode, or a property given twice.
// Every answer keeps the invariants (never a 5xx, every refusal in the error shape, no secret leaves,
// no error logged); a well-formed request from the key's owner gets the one right status, and a
// success echoes what it was given. test/fuzz/key-settings-http.test.ts runs it briefly on every
// `bun test`; scripts/experiments/fuzz.ts runs it at length.
import fc from 'fast-check';
import { type TestKeygate, testKeygate } from '../support/keygate';

const MAX_EXPIRES_IN = 315_360_000;
const META_BYTES = 2048;
const USER = 1;
const OTHER_USER = 2;

/** One property's value as sent: its JSON text, and whether keygate must accept it (undefined: not judged). */
type Value = { text: string; valid: boolean | undefined; value?: unknown };

const judged = (text: string): Value => {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { text, valid: false };
  }
  return { text, valid: true, value };
};

/** A raw number text and whether it is a whole number from min to max once parsed. */
const wholeIn =
  (min: number, max: number) =>
  (text: string): Value => {
    const value: unknown = JSON.parse(text);
    return {
      text,
      valid: typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max,
      value,
    };
  };

/** true in `percent` of the cases. */
const rarely = (percent: number) => fc.nat(99).map((n) => n < percent);

const NUMBER_TEXTS = [
  '0',
  '-0',
  '1',
  '-1',
  '1.5',
  '1.0',
  '1e0',
  '1E1',
  '1e3',
  '1e9',
  '1e308',
  '-1e308',
  '1e999',
  '5e-324',
  '0.1',
  '1000',
  '1001',
  '86400',
  '86401',
  '1000000',
  '1000001',
  '31536000',
  '31536001',
  '1000000000',
  '1000000001',
  '9007199254740991',
  '9007199254740993',
  '123456789012345678901234567890',
  '1.0000000000000002',
];
const NOT_NUMBERS = ['"5"', '"1e3"', 'null', 'true', '[]', '[1]', '{}', '""', '"\\u0000"', '"٣"'];

/** A number from the edges, any integer or double, or something that is no number at all. */
const numberValue = (min: number, max: number): fc.Arbitrary<Value> =>
  fc
    .oneof(
      { weight: 4, arbitrary: fc.integer({ min, max: Math.min(max, min + 20) }).map(String) },
      { weight: 2, arbitrary: fc.integer({ min, max }).map(String) },
      { weight: 4, arbitrary: fc.constantFrom(...NUMBER_TEXTS) },
      {
        weight: 1,
        arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
      },
      { weight: 1, arbitrary: fc.bigInt().map(String) },
    )
    .map(wholeIn(min, max))
    .chain((v) =>
      fc.oneof(
        { weight: 9, arbitrary: fc.constant(v) },
        { weight: 1, arbitrary: fc.constantFrom(...NOT_NUMBERS).map((text) => ({ text, valid: false })) },
      ),
    );

/** An object written from its fields' values: valid when each is and nothing is missing or extra. */
function objectValue(
  fields: Array<[string, Value | undefined, boolean]>,
  extra: Array<[string, string]>,
  twice: boolean,
): Value {
  const given = fields.filter((f): f is [string, Value, boolean] => f[1] !== undefined);
  const parts = given.map(([name, value]) => `${JSON.stringify(name)}:${value.text}`);
  for (const [name, text] of extra) parts.push(`${JSON.stringify(name)}:${text}`);
  // The same property twice: JSON.parse keeps the last, keygate may keep it or refuse; not judged.
  if (twice && parts.length > 0) parts.push(parts[0] as string);
  const text = `{${parts.join(',')}}`;
  const missing = fields.some(([, value, required]) => required && value === undefined);
  const values = given.map(([, value]) => value.valid);
  const valid =
    twice || values.includes(undefined)
      ? undefined
      : !missing && extra.length === 0 && values.every((ok) => ok === true);
  return { text, valid, value: valid ? JSON.parse(text) : undefined };
}

const extraProperties = fc.oneof(
  { weight: 6, arbitrary: fc.constant([] as Array<[string, string]>) },
  {
    weight: 1,
    arbitrary: fc.array(
      fc.tuple(
        fc.oneof(fc.constantFrom('__proto__', 'constructor', 'extra', 'Limit', 'amount ', ''), fc.string()),
        fc.constantFrom('1', 'null', '{}', '"x"'),
      ),
      { minLength: 1, maxLength: 2 },
    ),
  },
);

const rateLimitValue: fc.Arbitrary<Value> = fc
  .record({
    limit: fc.option(numberValue(1, 1_000_000), { nil: undefined, freq: 8 }),
    duration: fc.option(numberValue(1, 86_400), { nil: undefined, freq: 8 }),
    extra: extraProperties,
    twice: rarely(10),
  })
  .map(({ limit, duration, extra, twice }) =>
    objectValue(
      [
        ['limit', limit, true],
        ['duration', duration, true],
      ],
      extra,
      twice,
    ),
  );

const creditsValue: fc.Arbitrary<Value> = fc
  .record({
    remaining: fc.option(numberValue(0, 1_000_000_000), { nil: undefined, freq: 8 }),
    refill: fc.option(
      fc
        .record({
          amount: fc.option(numberValue(1, 1_000_000_000), { nil: undefined, freq: 8 }),
          interval: fc.option(numberValue(1, 31_536_000), { nil: undefined, freq: 8 }),
          extra: extraProperties,
        })
        .map(({ amount, interval, extra }) =>
          objectValue(
            [
              ['amount', amount, true],
              ['interval', interval, true],
            ],
            extra,
            false,
          ),
        ),
      { nil: undefined, freq: 2 },
    ),
    extra: extraProperties,
  })
  .map(({ remaining, refill, extra }) =>
    objectValue(
      [
        ['remaining', remaining, true],
        ['refill', refill, false],
      ],
      extra,
      false,
    ),
  );

const metaSize = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');

/** Nesting depth of a JSON value: a scalar 0, an object or array one more than its deepest child. */
const depthOf = (value: unknown): number =>
  value !== null && typeof value === 'object'
    ? 1 + Math.max(0, ...Object.values(value as object).map(depthOf))
    : 0;

const metaObject = (value: unknown): Value => {
  const text = JSON.stringify(value);
  const size = metaSize(value);
  // Near the limits (2,048 bytes, and the body's 32 levels with meta one level in) the rule is
  // judged by the property tests of the settings; here only far from them.
  const depth = depthOf(value) + 1;
  const nearEdge = Math.abs(size - META_BYTES) <= 2 || (depth >= 31 && depth <= 33);
  return { text, valid: nearEdge ? undefined : size <= META_BYTES && depth <= 32, value };
};

const metaValue: fc.Arbitrary<Value> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 })
      .map(metaObject),
  },
  {
    weight: 2,
    arbitrary: fc
      .record({ n: fc.integer({ min: 1900, max: 2200 }), unit: fc.constantFrom('x', 'é', '鍵', '😀', '\\') })
      .map(({ n, unit }) => metaObject({ text: unit.repeat(Math.ceil(n / Buffer.byteLength(unit))) })),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 60 }).map((depth) => {
      let value: unknown = 1;
      for (let i = 0; i < depth; i++) value = { a: value };
      return metaObject(value);
    }),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(
        '{"__proto__":{"polluted":true}}',
        '{"constructor":{"prototype":{"x":1}}}',
        '{"":""}',
        '{"\\u0000":"\\u0000"}',
        '{"ключ":"значение","鍵":"🔑"}',
        '{"big":1e308,"small":-1e308,"tiny":5e-324}',
        '{"toString":"x","valueOf":1}',
      )
      .map(judged),
  },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom(
        '[]',
        '[{"a":1}]',
        '"meta"',
        '1',
        'true',
        'false',
        '""',
        '{"a":1e999}', // Infinity once parsed: no longer the JSON that was sent
        '{"a":1,"a":2}',
        '{"\\ud800":"\\udfff"}',
      )
      .map((text) => (text.startsWith('{') ? { text, valid: undefined } : { text, valid: false })),
  },
);

const enabledValue: fc.Arbitrary<Value> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('true', 'false').map(judged) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('"true"', '"false"', '1', '0', '[]', '{}', '"yes"', 'True')
      .map((text) => ({ text, valid: false })),
  },
);

const nameValue: fc.Arbitrary<Value> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('"ci"', '"ключ"', '"🔑 prod"', '"鍵"').map(judged) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('""', '"   "', `"${'a'.repeat(129)}"`, '5', 'null', '[]', '{"a":1}')
      .map((text) => ({ text, valid: false })),
  },
);

/** A property that is null: removes the setting in an update, refused in a create. */
const NULL: Value = { text: 'null', valid: undefined, value: null };

type Settings = Partial<Record<'meta' | 'enabled' | 'ratelimit' | 'credits', Value>>;

const wellFormed = (text: string): Value => ({ text, valid: true, value: JSON.parse(text) });

/** Settings keygate must accept, so that successes are as common as refusals. */
const acceptedSettings: fc.Arbitrary<Settings> = fc.record(
  {
    meta: fc
      .dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 })
      .map(metaObject)
      .filter((value) => value.valid === true),
    enabled: fc.boolean().map((b) => wellFormed(String(b))),
    ratelimit: fc
      .record({
        limit: fc.integer({ min: 1, max: 1_000_000 }),
        duration: fc.integer({ min: 1, max: 86_400 }),
      })
      .map((value) => wellFormed(JSON.stringify(value))),
    credits: fc
      .record(
        {
          remaining: fc.integer({ min: 0, max: 1_000_000_000 }),
          refill: fc.record({
            amount: fc.integer({ min: 1, max: 1_000_000_000 }),
            interval: fc.integer({ min: 1, max: 31_536_000 }),
          }),
        },
        { requiredKeys: ['remaining'] },
      )
      .map((value) => wellFormed(JSON.stringify(value))),
  },
  { requiredKeys: [] },
);

const settings = (allowNull: boolean): fc.Arbitrary<Settings> =>
  fc.oneof(acceptedSettings, hostileSettings(allowNull));

const hostileSettings = (allowNull: boolean): fc.Arbitrary<Settings> =>
  fc.record(
    {
      meta: allowNull
        ? fc.oneof({ weight: 5, arbitrary: metaValue }, { weight: 1, arbitrary: fc.constant(NULL) })
        : metaValue,
      enabled: enabledValue,
      ratelimit: allowNull
        ? fc.oneof({ weight: 5, arbitrary: rateLimitValue }, { weight: 1, arbitrary: fc.constant(NULL) })
        : rateLimitValue,
      credits: allowNull
        ? fc.oneof({ weight: 5, arbitrary: creditsValue }, { weight: 1, arbitrary: fc.constant(NULL) })
        : creditsValue,
    },
    { requiredKeys: [] },
  );

// ---------------------------------------------------------------- requests

type Who =
  | { kind: 'owner' }
  | { kind: 'other-user' }
  | { kind: 'key'; ref: number }
  | { kind: 'none' }
  | { kind: 'garbage'; value: string };

type KeyChoice = { kind: 'known'; ref: number } | { kind: 'unknown' } | { kind: 'raw'; segment: string };

export type SettingsRequest =
  | {
      kind: 'create';
      scheme: 'jwt' | 'key';
      who: Who;
      level: number;
      settings: Settings;
      nullSetting: boolean;
      unknown: boolean;
      twice: boolean;
    }
  | {
      kind: 'update';
      scheme: 'jwt' | 'key';
      who: Who;
      target: KeyChoice;
      name: Value | undefined;
      level: Value | undefined;
      expiresIn: Value | undefined;
      settings: Settings;
      unknown: boolean;
      twice: boolean;
    }
  | {
      kind: 'usage';
      scheme: 'jwt' | 'key';
      who: Who;
      target: KeyChoice;
      query: string;
      queryValid: boolean | undefined;
    }
  | {
      kind: 'verify';
      target: KeyChoice;
      wrongSecret: boolean;
      cost: Value | undefined;
      minLevel: number | undefined;
      twice: boolean;
    }
  | { kind: 'forward-auth'; target: KeyChoice; minLevel: number | undefined }
  | { kind: 'raw'; method: string; path: 'create' | 'update' | 'verify'; body: string; contentType: string };

export type SettingsStep = { kind: 'request'; request: SettingsRequest } | { kind: 'tick'; seconds: number };

const who: fc.Arbitrary<Who> = fc.oneof(
  { weight: 12, arbitrary: fc.constant({ kind: 'owner' } as Who) },
  { weight: 1, arbitrary: fc.constant({ kind: 'other-user' } as Who) },
  { weight: 3, arbitrary: fc.nat().map((ref) => ({ kind: 'key', ref }) as Who) },
  { weight: 1, arbitrary: fc.constant({ kind: 'none' } as Who) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(
        'Bearer x.y.z',
        'Basic Og==',
        `Basic ${Buffer.from('kg_x:y').toString('base64')}`,
        'Digest x',
      )
      .map((value) => ({ kind: 'garbage', value }) as Who),
  },
);

const keyChoice: fc.Arbitrary<KeyChoice> = fc.oneof(
  { weight: 10, arbitrary: fc.nat().map((ref) => ({ kind: 'known', ref }) as KeyChoice) },
  { weight: 1, arbitrary: fc.constant({ kind: 'unknown' } as KeyChoice) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('%zz', 'kg_', `kg_${'a'.repeat(200)}`, '..', '%00', 'kg_aaaaaaaaaaaaaaaaaaaaaa%2F', '鍵')
      .map((segment) => ({ kind: 'raw', segment: encodeURI(segment) }) as KeyChoice),
  },
);

const USAGE_QUERIES: Array<[string, boolean | undefined]> = [
  ['', true],
  ['?granularity=hour', true],
  ['?granularity=day', true],
  ['?granularity=minute', false],
  ['?granularity=HOUR', false],
  ['?granularity=', false],
  ['?granularity=hour&granularity=day', false],
  ['?since=2026-11-22', undefined],
  ['?since=2026-11-22T10:00:00Z&until=2026-11-23T10:00:00Z', undefined],
  ['?since=yesterday', false],
  ['?since=2026-13-45', false],
  ['?until=%00', false],
  ['?since=275760-09-13T00:00:00Z', undefined],
  ['?since=-271821-04-20', undefined],
  ['?limit=10', false],
  ['?__proto__=1', false],
  ['?%zz', undefined],
  ['?since=2026-11-22T10:00:00', false],
];

const costValue: fc.Arbitrary<Value | undefined> = fc.option(numberValue(0, 1000), {
  nil: undefined,
  freq: 3,
});

/** The scheme that fits the credential, or now and then the other one (a credential of the wrong scheme). */
const schemeChoice = fc.constantFrom<'fits' | 'other'>(
  'fits',
  'fits',
  'fits',
  'fits',
  'fits',
  'fits',
  'fits',
  'other',
);

/** The route's scheme for a request whose `scheme` says whether it fits its credential. */
function withScheme<R extends { who: Who; scheme: 'fits' | 'other' }>(
  r: R,
): Omit<R, 'scheme'> & { scheme: 'jwt' | 'key' } {
  const fits = r.who.kind === 'key' ? 'key' : 'jwt';
  return { ...r, scheme: r.scheme === 'fits' ? fits : fits === 'key' ? 'jwt' : 'key' };
}

const request: fc.Arbitrary<SettingsRequest> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record({
        kind: fc.constant('create' as const),
        scheme: schemeChoice,
        who,
        level: fc.integer({ min: 0, max: 8 }),
        settings: settings(false),
        nullSetting: rarely(10),
        unknown: rarely(10),
        twice: rarely(10),
      })
      .map(withScheme),
  },
  {
    weight: 6,
    arbitrary: fc
      .record({
        kind: fc.constant('update' as const),
        scheme: schemeChoice,
        who,
        target: keyChoice,
        name: fc.option(nameValue, { nil: undefined, freq: 4 }),
        level: fc.option(
          fc.oneof(
            { weight: 3, arbitrary: fc.integer({ min: 0, max: 8 }).map((n) => wellFormed(String(n))) },
            { weight: 1, arbitrary: numberValue(0, 8) },
          ),
          { nil: undefined, freq: 4 },
        ),
        expiresIn: fc.option(
          fc.oneof(
            numberValue(1, MAX_EXPIRES_IN),
            fc.constantFrom('60', '3600', '86400').map(wholeIn(1, MAX_EXPIRES_IN)),
          ),
          { nil: undefined, freq: 4 },
        ),
        settings: settings(true),
        unknown: rarely(10),
        twice: rarely(10),
      })
      .map(withScheme),
  },
  {
    weight: 2,
    arbitrary: fc
      .record({
        kind: fc.constant('usage' as const),
        scheme: schemeChoice,
        who,
        target: keyChoice,
        query: fc.constant(''),
        queryValid: fc.constant<boolean | undefined>(true),
      })
      .map(withScheme)
      .chain((r) =>
        fc.constantFrom(...USAGE_QUERIES).map(([query, queryValid]) => ({ ...r, query, queryValid })),
      ),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('verify' as const),
      target: keyChoice,
      wrongSecret: rarely(20),
      cost: costValue,
      minLevel: fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined, freq: 3 }),
      twice: rarely(5),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('forward-auth' as const),
      target: keyChoice,
      minLevel: fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined, freq: 3 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('raw' as const),
      method: fc.constantFrom('POST', 'PATCH', 'PUT'),
      path: fc.constantFrom<'create' | 'update' | 'verify'>('create', 'update', 'verify'),
      body: fc.oneof(
        fc.jsonValue().map((value) => JSON.stringify(value)),
        fc.string({ unit: 'binary', maxLength: 200 }),
        fc.constantFrom(
          '{"meta":{}}',
          '{"name":"x","level":1,"expiresIn":60,"meta":{"a":1},"meta":{"a":2}}',
          '{"credits":{"remaining":1},"credits":null}',
          '{"ratelimit":{"limit":1,"duration":1,"limit":0}}',
          '{"enabled":false,"enabled":true}',
          '{"key":"kg_x","secret":"y","cost":1,"cost":1001}',
          `{"meta":${'{"a":'.repeat(40)}1${'}'.repeat(40)}}`,
          `{"meta":{"a":"${'\\ud83d\\ude00'.repeat(600)}"}}`,
          '{"name":"\\u0000","level":0,"expiresIn":1}',
          '{"credits":{"remaining":1e400}}',
          '{"ratelimit":{"limit":-0,"duration":-0}}',
          '\ufeff{"enabled":true}',
        ),
      ),
      contentType: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', ''),
    }),
  },
);

export const settingsStep: fc.Arbitrary<SettingsStep> = fc.oneof(
  { weight: 12, arbitrary: request.map((r) => ({ kind: 'request', request: r }) as SettingsStep) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 120 }).map((seconds) => ({ kind: 'tick', seconds }) as SettingsStep),
  },
);

// ---------------------------------------------------------------- the world and its invariants

type Known = {
  key: string;
  secret: string;
  userId: number;
  level: number;
  expiresAt: number;
};

export type SettingsStats = {
  requests: number;
  /** Statuses per kind of request. */
  routes: Record<string, Record<number, number>>;
  /** Requests whose status the model judged exactly. */
  judged: number;
};

export function newSettingsStats(): SettingsStats {
  return { requests: 0, routes: {}, judged: 0 };
}

const VERIFY_CODES = [
  'VALID',
  'NOT_FOUND',
  'EXPIRED',
  'DISABLED',
  'INSUFFICIENT_LEVEL',
  'RATE_LIMITED',
  'USAGE_EXCEEDED',
];

class World {
  readonly known: Known[] = [];
  readonly violations: string[] = [];
  tokens = new Map<number, string>();
  constructor(readonly k: TestKeygate) {}

  pick(ref: number): Known | undefined {
    return this.known.length === 0 ? undefined : this.known[ref % this.known.length];
  }

  isLive(key: Known): boolean {
    return key.expiresAt > this.k.time.now;
  }

  /** A token signed now, on the clock the world moves. */
  async bearer(userId: number): Promise<string> {
    const token = await this.k.token(userId, { ttlSeconds: 365 * 86_400 });
    return `Bearer ${token}`;
  }
}

const basicOf = (k: Pick<Known, 'key' | 'secret'>) =>
  `Basic ${Buffer.from(`${k.key}:${k.secret}`).toString('base64')}`;

async function authorizationOf(world: World, w: Who): Promise<string | undefined> {
  switch (w.kind) {
    case 'owner':
      return world.bearer(USER);
    case 'other-user':
      return world.bearer(OTHER_USER);
    case 'key': {
      const key = world.pick(w.ref);
      return key === undefined ? undefined : basicOf(key);
    }
    case 'none':
      return undefined;
    case 'garbage':
      return w.value;
  }
}

function idOf(world: World, choice: KeyChoice): { id: string; key: Known | undefined } {
  if (choice.kind === 'known') {
    const key = world.pick(choice.ref);
    return { id: key?.key ?? 'kg_0000000000000000000000', key };
  }
  return choice.kind === 'unknown'
    ? { id: 'kg_0000000000000000000000', key: undefined }
    : { id: choice.segment, key: undefined };
}

function settingsText(s: Settings, nullSetting = false): { parts: string[]; valid: boolean | undefined } {
  const parts: string[] = [];
  const validity: Array<boolean | undefined> = [];
  for (const [name, value] of Object.entries(s)) {
    if (value === undefined) continue;
    parts.push(`${JSON.stringify(name)}:${value.text}`);
    validity.push(value.valid);
  }
  if (nullSetting) {
    // A create may not carry null for a setting.
    parts.push('"meta":null');
    validity.push(s.meta === undefined ? false : undefined);
  }
  return { parts, valid: together(validity) };
}

/** What a request must get: the exact status (undefined: not judged) and what its success must show. */
type Expectation = { status: number | undefined; check?: (json: Record<string, unknown>) => void };

/** A request ready to send, and what it must get. */
type Built = {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
  expected: Expectation;
};

type Report = (message: string) => void;

const NOT_JUDGED: Expectation = { status: undefined };

/** The validity of several values together: false when any is refused, undefined when any is not judged. */
const together = (values: Array<boolean | undefined>): boolean | undefined =>
  values.includes(false) ? false : values.includes(undefined) ? undefined : true;

async function buildCreate(
  world: World,
  r: Extract<SettingsRequest, { kind: 'create' }>,
  v: Report,
): Promise<Built> {
  const headers: Record<string, string> = {};
  const parent = r.scheme === 'key' && r.who.kind === 'key' ? world.pick(r.who.ref) : undefined;
  const auth = r.scheme === 'jwt' ? await authorizationOf(world, r.who) : parent && basicOf(parent);
  if (auth !== undefined) headers.authorization = auth;
  const { parts, valid } = settingsText(r.settings, r.nullSetting);
  const all = ['"name":"fuzz"', `"level":${r.level}`, '"expiresIn":3600', ...parts];
  if (r.unknown) all.push('"userId":1');
  if (r.twice) all.push(all[0] as string);
  const judgedHere = r.scheme === 'jwt' && r.who.kind === 'owner' && !r.twice;
  const expected: Expectation = !judgedHere
    ? NOT_JUDGED
    : {
        status: r.unknown || valid === false ? 400 : valid === true ? 201 : undefined,
        check: (json) => {
          const apikey = json.apikey as Record<string, unknown>;
          const want: Record<string, unknown> = {};
          for (const [name, value] of Object.entries(r.settings)) if (value) want[name] = value.value;
          const got = Object.fromEntries(Object.keys(want).map((name) => [name, apikey[name]]));
          if (JSON.stringify(got) !== JSON.stringify(want))
            v(
              `create echoed ${JSON.stringify(got).slice(0, 300)}, sent ${JSON.stringify(want).slice(0, 300)}`,
            );
          const extra = ['meta', 'enabled', 'ratelimit', 'credits'].filter(
            (name) => name in apikey && !(name in want),
          );
          if (extra.length > 0) v(`create answered settings it was not given: ${extra.join()}`);
        },
      };
  return { method: 'POST', path: `/apikeys/${r.scheme}`, headers, body: `{${all.join(',')}}`, expected };
}

async function buildUpdate(
  world: World,
  r: Extract<SettingsRequest, { kind: 'update' }>,
  v: Report,
): Promise<Built> {
  const headers: Record<string, string> = {};
  const { id, key } = idOf(world, r.target);
  const auth = r.scheme === 'jwt' || r.who.kind === 'key' ? await authorizationOf(world, r.who) : undefined;
  if (auth !== undefined) headers.authorization = auth;
  const { parts } = settingsText(r.settings);
  const plain: Array<[string, Value | undefined]> = [
    ['name', r.name],
    ['level', r.level],
    ['expiresIn', r.expiresIn],
  ];
  for (const [name, value] of plain)
    if (value !== undefined) parts.unshift(`${JSON.stringify(name)}:${value.text}`);
  const given = [...plain, ...Object.entries(r.settings)].filter(
    (entry): entry is [string, Value] => entry[1] !== undefined,
  );
  // null for meta, ratelimit and credits removes them: valid in an update.
  const values = together(given.map(([, value]) => (value === NULL ? true : value.valid)));
  if (r.unknown) parts.push('"userId":1');
  if (r.twice && parts.length > 0) parts.push(parts[0] as string);
  // An empty object or an unknown property is refused; a property given twice is not judged.
  const valid = parts.length === 0 || r.unknown || values === false ? false : r.twice ? undefined : values;
  const judgedHere =
    r.scheme === 'jwt' && (r.who.kind === 'owner' || r.who.kind === 'other-user') && r.target.kind !== 'raw';
  const caller = r.who.kind === 'owner' ? USER : OTHER_USER;
  // As for a delete: another user's, an expired or an unknown key is 404, after the body's 400.
  const visible = key !== undefined && world.isLive(key) && key.userId === caller;
  const now = world.k.time.now;
  const expected: Expectation = !judgedHere
    ? NOT_JUDGED
    : {
        status: valid === false ? 400 : valid === undefined ? undefined : visible ? 200 : 404,
        check: (json) => {
          const apikey = json.apikey as Record<string, unknown>;
          for (const [name, value] of given) {
            if (name === 'expiresIn') continue;
            const shown = apikey[name];
            const same =
              value.value === null
                ? !(name in apikey)
                : JSON.stringify(shown) === JSON.stringify(value.value);
            if (!same)
              v(
                `update shows ${name} ${JSON.stringify(shown)?.slice(0, 200)}, sent ${value.text.slice(0, 200)}`,
              );
          }
          if (
            r.expiresIn?.valid &&
            Date.parse(String(apikey.expiresAt)) !== now + Number(r.expiresIn.value) * 1000
          )
            v(`update set expiresAt ${apikey.expiresAt}, not now + ${r.expiresIn.text} s`);
        },
      };
  return {
    method: 'PATCH',
    path: `/apikeys/${id}/${r.scheme}`,
    headers,
    body: `{${parts.join(',')}}`,
    expected,
  };
}

async function buildUsage(
  world: World,
  r: Extract<SettingsRequest, { kind: 'usage' }>,
  v: Report,
): Promise<Built> {
  const headers: Record<string, string> = {};
  const { id, key } = idOf(world, r.target);
  const auth = r.scheme === 'jwt' || r.who.kind === 'key' ? await authorizationOf(world, r.who) : undefined;
  if (auth !== undefined) headers.authorization = auth;
  const judgedHere = r.scheme === 'jwt' && r.who.kind === 'owner' && r.target.kind !== 'raw';
  const visible = key !== undefined && world.isLive(key) && key.userId === USER;
  const expected: Expectation = !judgedHere
    ? NOT_JUDGED
    : {
        status: r.queryValid === false ? 400 : r.queryValid === undefined ? undefined : visible ? 200 : 404,
        check: (json) => {
          if (!Array.isArray(json.usage)) v('usage answered without a usage array');
        },
      };
  return { method: 'GET', path: `/apikeys/${id}/usage/${r.scheme}${r.query}`, headers, expected };
}

function buildVerify(world: World, r: Extract<SettingsRequest, { kind: 'verify' }>, v: Report): Built {
  const { id, key } = idOf(world, r.target);
  const secret = key === undefined || r.wrongSecret ? 'A'.repeat(43) : key.secret;
  const parts = [`"key":${JSON.stringify(id)}`, `"secret":${JSON.stringify(secret)}`];
  if (r.cost !== undefined) parts.push(`"cost":${r.cost.text}`);
  if (r.minLevel !== undefined) parts.push(`"minLevel":${r.minLevel}`);
  if (r.twice) parts.push(parts[0] as string);
  const valid = r.twice ? undefined : r.cost === undefined ? true : r.cost.valid;
  const expected: Expectation = {
    status: valid === false ? 400 : valid === true ? 200 : undefined,
    check: (json) => {
      if (!VERIFY_CODES.includes(String(json.code))) v(`verify answered code ${json.code}`);
      if (json.valid !== (json.code === 'VALID')) v(`verify: valid ${json.valid} with ${json.code}`);
      const credits = json.credits as { remaining?: unknown } | undefined;
      if (credits !== undefined && !(Number.isInteger(credits.remaining) && Number(credits.remaining) >= 0))
        v(`verify reported credits ${JSON.stringify(credits)}`);
      if (
        json.code === 'RATE_LIMITED' &&
        !(Number.isInteger(json.retryAfter) && Number(json.retryAfter) >= 1)
      )
        v(`RATE_LIMITED with retryAfter ${json.retryAfter}`);
      if (json.code === 'VALID' && (key === undefined || r.wrongSecret))
        v('VALID for a wrong secret or an unknown key');
    },
  };
  return { method: 'POST', path: '/apikeys/verify', headers: {}, body: `{${parts.join(',')}}`, expected };
}

function buildForwardAuth(world: World, r: Extract<SettingsRequest, { kind: 'forward-auth' }>): Built {
  const { id, key } = idOf(world, r.target);
  return {
    method: 'GET',
    path: `/forward-auth${r.minLevel === undefined ? '' : `?minLevel=${r.minLevel}`}`,
    headers: { 'x-api-key': id, 'x-api-secret': key?.secret ?? 'A'.repeat(43) },
    expected: NOT_JUDGED,
  };
}

async function buildRaw(world: World, r: Extract<SettingsRequest, { kind: 'raw' }>): Promise<Built> {
  const known = world.pick(0)?.key ?? 'kg_0000000000000000000000';
  const path = { create: '/apikeys/jwt', verify: '/apikeys/verify', update: `/apikeys/${known}/jwt` }[r.path];
  const headers: Record<string, string> = { authorization: await world.bearer(USER) };
  if (r.contentType !== '') headers['content-type'] = r.contentType;
  return {
    method: r.path === 'update' ? 'PATCH' : r.method,
    path,
    headers,
    body: r.body,
    expected: NOT_JUDGED,
  };
}

function build(world: World, r: SettingsRequest, v: Report): Built | Promise<Built> {
  switch (r.kind) {
    case 'create':
      return buildCreate(world, r, v);
    case 'update':
      return buildUpdate(world, r, v);
    case 'usage':
      return buildUsage(world, r, v);
    case 'verify':
      return buildVerify(world, r, v);
    case 'forward-auth':
      return buildForwardAuth(world, r);
    case 'raw':
      return buildRaw(world, r);
  }
}

/** Sends one request, checks the invariants and its expectation, and updates the world. */
async function exchange(world: World, r: SettingsRequest, stats: SettingsStats): Promise<void> {
  const v: Report = (message) =>
    world.violations.push(`${message} — request ${JSON.stringify(r).slice(0, 700)}`);
  const { method, path, headers, body, expected } = await build(world, r, v);
  if (body !== undefined && headers['content-type'] === undefined)
    headers['content-type'] = 'application/json';

  stats.requests++;
  const response = await world.k.req(method, path, { headers, body });
  const route = r.kind === 'raw' ? `raw ${r.path}` : r.kind;
  stats.routes[route] ??= {};
  const byRoute = stats.routes[route] as Record<number, number>;
  byRoute[response.status] = (byRoute[response.status] ?? 0) + 1;

  const { status, json, text } = response;
  if (status >= 500) v(`status ${status}: ${text.slice(0, 200)}`);
  if (status >= 300) {
    const keys = json && typeof json === 'object' ? Object.keys(json).sort().join() : '';
    if (!/^application\/json(;|$)/.test(response.headers.get('content-type') ?? ''))
      v(`status ${status} with Content-Type ${response.headers.get('content-type')}`);
    if (
      keys !== 'error,result' ||
      json.result !== 'error' ||
      typeof json.error !== 'string' ||
      json.error === ''
    )
      v(`status ${status} without the error shape: ${text.slice(0, 200)}`);
  }
  if (status === 429 && r.kind === 'forward-auth') {
    const code = response.headers.get('x-keygate-code');
    if (code !== 'RATE_LIMITED' && code !== 'USAGE_EXCEEDED')
      v(`forward-auth 429 with X-Keygate-Code ${code}`);
    if (code === 'RATE_LIMITED' && !/^[1-9][0-9]*$/.test(response.headers.get('retry-after') ?? ''))
      v('forward-auth RATE_LIMITED without Retry-After');
  }
  const created = status === 201 ? (json?.apikey as Record<string, unknown> | undefined) : undefined;
  for (const known of world.known) {
    if (text.includes(known.secret) && created?.key !== known.key)
      v(`response carries the secret of ${known.key}`);
  }
  if (expected.status !== undefined) {
    stats.judged++;
    if (status !== expected.status)
      v(`answered ${status}, the model expects ${expected.status}: ${text.slice(0, 200)}`);
    else if (status < 300 && expected.check) expected.check(json);
  }
  if (created !== undefined && typeof created.key === 'string' && typeof created.secret === 'string') {
    world.known.push({
      key: created.key,
      secret: created.secret,
      userId: Number(created.userId),
      level: Number(created.level),
      expiresAt: Date.parse(String(created.expiresAt)),
    });
  }
  if (r.kind === 'update' && status === 200) {
    const apikey = json?.apikey as Record<string, unknown> | undefined;
    const updated = world.known.find((key) => key.key === apikey?.key);
    if (updated && apikey) {
      updated.expiresAt = Date.parse(String(apikey.expiresAt));
      updated.level = Number(apikey.level);
    }
  }
}

/** Runs one sequence on a fresh keygate; resolves with the violations found. */
export async function runSettingsSequence(steps: SettingsStep[], stats: SettingsStats): Promise<string[]> {
  const k = await testKeygate({ MAX_KEYS_PER_USER: '100000' });
  const world = new World(k);
  try {
    // Keys to act on from the start: plain, limited with credits that refill, and another user's.
    const seeds: Array<[number, string]> = [
      [USER, '{"name":"plain","level":5,"expiresIn":3600}'],
      [
        USER,
        '{"name":"limited","level":3,"expiresIn":3600,"ratelimit":{"limit":3,"duration":60},"credits":{"remaining":5,"refill":{"amount":5,"interval":60}}}',
      ],
      [USER, '{"name":"meta","level":8,"expiresIn":86400,"meta":{"tenant":"acme"},"enabled":true}'],
      [OTHER_USER, '{"name":"other","level":2,"expiresIn":3600,"credits":{"remaining":1}}'],
    ];
    for (const [user, body] of seeds) {
      const created = await k.req('POST', '/apikeys/jwt', {
        headers: { authorization: await world.bearer(user) },
        body,
      });
      if (created.status !== 201) throw new Error(`seed create failed: ${created.status} ${created.text}`);
      const apikey = created.json.apikey;
      world.known.push({
        key: apikey.key,
        secret: apikey.secret,
        userId: apikey.userId,
        level: apikey.level,
        expiresAt: Date.parse(apikey.expiresAt),
      });
    }
    for (const step of steps) {
      if (step.kind === 'tick') k.time.now += step.seconds * 1000;
      else await exchange(world, step.request, stats);
    }
    for (const line of k.logLines()) {
      if (line.level === 'error' || line.msg === 'unexpected error')
        world.violations.push(`logged "${line.msg}": ${String(line.error).slice(0, 200)}`);
    }
  } finally {
    await k.close();
  }
  return world.violations;
}

export const settingsSequence = fc.array(settingsStep, { minLength: 1, maxLength: 30 });

/** The property: no sequence of hostile settings breaks an invariant. */
export function keySettingsProperty(stats: SettingsStats, onViolations?: (violations: string[]) => void) {
  return fc.asyncProperty(settingsSequence, async (steps) => {
    const violations = await runSettingsSequence(steps, stats);
    if (onViolations) onViolations(violations);
    else if (violations.length > 0) throw new Error(violations.slice(0, 5).join('\n'));
  });
}
