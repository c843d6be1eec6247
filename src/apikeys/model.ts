// The shapes of the API-key endpoints as `t` schemas: the one source of truth for validation,
// the OpenAPI document and the TypeScript types.
import { Elysia, t } from 'elysia';
import { LEVEL_RULE, MAX_LEVEL, MIN_LEVEL } from '../core/levels';
import { allowedIpsProblem } from '../network/blocks';
import { heldPermissionsProblem, PERMISSION_RULE } from '../permissions/names';
import type { KeySettings } from './settings';

/**
 * A whole number in a response. Not t.Integer(): Elysia's also accepts "5" and decodes it, a
 * transform that makes every response pass through TypeBox's Encode walk instead of a compiled Check
 * (~9 % of a verify's CPU). The OpenAPI document writes this as `type: integer`.
 */
export const WholeNumber = () => t.Number({ multipleOf: 1 });

export const CREATE_PROPERTIES = ['name', 'level', 'expiresIn'] as const;
/** The optional settings a create (and an update) may carry beside them. */
export const SETTING_PROPERTIES = [
  'meta',
  'enabled',
  'ratelimit',
  'credits',
  'permissions',
  'allowedIps',
] as const;

const Integer = (minimum: number, maximum: number, description?: string) =>
  t.Number({ multipleOf: 1, minimum, maximum, ...(description ? { description } : {}) });

export const KeyMeta = t.Object(
  {},
  {
    additionalProperties: true,
    title: 'KeyMeta',
    description: 'Free-form metadata: a JSON object of at most 2,048 bytes as compact UTF-8 JSON.',
  },
);
export const RateLimit = t.Object(
  {
    limit: Integer(1, 1_000_000, 'Verifications allowed per duration.'),
    duration: Integer(1, 86_400, 'Seconds.'),
  },
  { additionalProperties: false, title: 'RateLimit' },
);
export const Credits = t.Object(
  {
    remaining: Integer(0, 1_000_000_000, 'Credits left; each VALID verification takes its cost.'),
    refill: t.Optional(
      t.Object(
        {
          amount: Integer(1, 1_000_000_000, 'remaining is set to this (not added) at every refill.'),
          interval: Integer(1, 31_536_000, 'Seconds between refills, counted from when credits were set.'),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false, title: 'Credits' },
);

/**
 * What a key may do. The schema says the shape; each name's characters and wildcards are checked by
 * the permissions rules (permissions/names.ts), whose sentences say which entry is wrong.
 */
export const Permissions = t.Array(t.String({ minLength: 1, maxLength: 128 }), {
  minItems: 1,
  maxItems: 100,
  uniqueItems: true,
  title: 'Permissions',
  description:
    'Distinct permission names of 1..128 characters of A-Z a-z 0-9 . _ : - /; a name may end in the wildcard .* (documents.* covers documents.read and documents.comments.write, not documents), and * covers all.',
});
/** Where a key may be used from; each entry is checked by network/blocks.ts. */
export const AllowedIps = t.Array(t.String({ minLength: 1, maxLength: 64 }), {
  minItems: 1,
  maxItems: 50,
  title: 'AllowedIps',
  description:
    'IPv4 or IPv6 addresses and CIDR blocks (203.0.113.0/24, 2001:db8::/32) the key may be used from; an IPv4-mapped IPv6 address is its IPv4 address.',
});

/** The rule of a setting, in one sentence, for a body that breaks it. */
export function settingRule(property: string): string | undefined {
  switch (property) {
    case 'meta':
      return 'meta must be a JSON object of at most 2048 bytes as compact JSON.';
    case 'enabled':
      return 'enabled must be true or false.';
    case 'ratelimit':
      return 'ratelimit must be {"limit": 1..1000000, "duration": 1..86400} (integers), and nothing else.';
    case 'credits':
      return 'credits must be {"remaining": 0..1000000000, "refill"?: {"amount": 1..1000000000, "interval": 1..31536000}} (integers), and nothing else.';
    case 'permissions':
      return `permissions: ${PERMISSION_RULE}`;
    case 'allowedIps':
      return 'allowedIps must be an array of 1 to 50 IPv4 or IPv6 addresses or CIDR blocks.';
    default:
      return undefined;
  }
}
/**
 * The sentence for a permissions or allowedIps value the rules refuse (the schema says only their
 * shape), or undefined when it is fine or the property is another.
 */
export function settingProblem(property: string, value: unknown): string | undefined {
  if (property === 'permissions') return heldPermissionsProblem(value);
  if (property === 'allowedIps') return allowedIpsProblem(value);
  return undefined;
}

export const NAME_MAX_CHARACTERS = 128;

// Names end up in dashboards, logs and terminals. Refused: control characters (Unicode category Cc),
// bidi embedding/override/isolate controls, and names made only of whitespace or invisible
// characters. "Invisible" is whitespace (JS `\s`) plus the Default_Ignorable_Code_Point characters:
// in the BMP listed here, beyond it the tag characters U+E0000–U+E0FFF (surrogate lead U+DB40).
// Written as regex sources for a regex without the `u` flag (TypeBox compiles `pattern` that way).
const CONTROL = '\\u0000-\\u001F\\u007F-\\u009F';
const BIDI_CONTROL = '\\u202A-\\u202E\\u2066-\\u2069';
const INVISIBLE_BMP =
  '\\s\\u00AD\\u034F\\u061C\\u115F\\u1160\\u17B4\\u17B5\\u180B-\\u180F\\u200B-\\u200F\\u2060-\\u206F\\u3164\\uFE00-\\uFE0F\\uFEFF\\uFFA0\\uFFF0-\\uFFF8';
/** One character that is seen: a BMP character outside the invisible set, or a pair outside the tags. */
const VISIBLE = `(?:[^${INVISIBLE_BMP}\\uD800-\\uDFFF]|[\\uD800-\\uDB3F\\uDB41-\\uDBFF][\\uDC00-\\uDFFF])`;
// 1..128 characters counted as code points (a surrogate pair is one character, a lone surrogate is
// refused), none of them a control, and at least one visible.
const NAME_PATTERN = `^(?=[\\s\\S]*?${VISIBLE})(?:[\\uD800-\\uDBFF][\\uDC00-\\uDFFF]|[^\\uD800-\\uDFFF${CONTROL}${BIDI_CONTROL}]){1,${NAME_MAX_CHARACTERS}}$`;

/** The name rule a string breaks, in one sentence, or undefined when it is a good name. */
export function nameProblem(name: string): string | undefined {
  if (new RegExp(`[${CONTROL}]`).test(name)) {
    return 'name must not contain control characters (such as NUL, tab, CR or LF).';
  }
  if (new RegExp(`[${BIDI_CONTROL}]`).test(name)) {
    return 'name must not contain bidi control characters (U+202A to U+202E, U+2066 to U+2069).';
  }
  if (!new RegExp(VISIBLE).test(name)) {
    return 'name must contain at least one visible character, not only whitespace or invisible characters.';
  }
  return new RegExp(NAME_PATTERN).test(name) ? undefined : NAME_RULE;
}

const NAME_RULE = 'name must be a string of 1 to 128 characters that is not only whitespace.';

/** The create body; the upper bound of `expiresIn` is configuration (MAX_EXPIRES_IN_SECONDS). */
export function createKeyBody(maxExpiresInSeconds: number) {
  return t.Object(
    {
      name: t.String({
        minLength: 1,
        maxLength: NAME_MAX_CHARACTERS * 2,
        pattern: NAME_PATTERN,
        description:
          'A name for the key: 1 to 128 characters, no control or bidi control characters, not only whitespace or invisible characters.',
      }),
      level: t.Number({
        multipleOf: 1,
        minimum: MIN_LEVEL,
        maximum: MAX_LEVEL,
        description: `Privilege level, ${LEVEL_RULE}, at most the caller’s own.`,
      }),
      expiresIn: t.Number({
        multipleOf: 1,
        minimum: 1,
        maximum: maxExpiresInSeconds,
        description: `Seconds until the key expires: an integer from 1 to ${maxExpiresInSeconds}.`,
      }),
      meta: t.Optional(KeyMeta),
      enabled: t.Optional(
        t.Boolean({ description: 'false: the key authenticates nothing until enabled again.' }),
      ),
      ratelimit: t.Optional(RateLimit),
      credits: t.Optional(Credits),
      permissions: t.Optional(Permissions),
      allowedIps: t.Optional(AllowedIps),
    },
    { additionalProperties: false, title: 'CreateKeyRequest' },
  );
}

export type CreateKeyInput = { name: string; level: number; expiresIn: number } & KeySettings;

/** One sentence per property, used when its value breaks the schema. */
export function propertyRule(property: string, maxExpiresInSeconds: number): string | undefined {
  switch (property) {
    case 'name':
      return NAME_RULE;
    case 'level':
      return `level must be ${LEVEL_RULE}.`;
    case 'expiresIn':
      return `expiresIn must be an integer number of seconds from 1 to ${maxExpiresInSeconds}.`;
    default:
      return settingRule(property);
  }
}

export const ApiKeyView = t.Object(
  {
    key: t.String({
      description:
        '`kg_`, 8 base62 digits of the creation time, 22 random base62 characters; the `:id` to delete it.',
    }),
    secret: t.String({
      description:
        'kgs_ + 43 base62 characters + a 6-character base62 CRC32 of them. Returned in this response only; keygate keeps only its SHA-256.',
    }),
    level: WholeNumber(),
    expiresAt: t.String({ description: 'ISO 8601 UTC with milliseconds.' }),
    name: t.String(),
    userId: WholeNumber(),
    meta: t.Optional(KeyMeta),
    enabled: t.Optional(t.Boolean()),
    ratelimit: t.Optional(RateLimit),
    credits: t.Optional(Credits),
    permissions: t.Optional(Permissions),
    allowedIps: t.Optional(AllowedIps),
  },
  { title: 'CreatedApiKey' },
);

export type ApiKeyView = typeof ApiKeyView.static;

export const CreatedResponse = t.Object(
  { result: t.Literal('success'), apikey: ApiKeyView },
  { title: 'CreatedResponse' },
);
export const ErrorResponse = t.Object({ result: t.Literal('error'), error: t.String() }, { title: 'Error' });
export const HealthResponse = t.Object({ status: t.Literal('ok') }, { title: 'Health' });

/** One sentence for a create body that failed the schema: the first problem a reader would fix. */
export function describeCreateBodyProblem(
  body: unknown,
  failedPath: string | undefined,
  maxExpiresInSeconds: number,
): string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return 'The body must be a JSON object with name, level and expiresIn.';
  }
  const allowed: readonly string[] = [...CREATE_PROPERTIES, ...SETTING_PROPERTIES];
  const extra = Object.keys(body).find((property) => !allowed.includes(property));
  if (extra !== undefined) {
    return `Unknown property "${extra.slice(0, 40)}": the body takes only name, level and expiresIn (and optionally ${SETTING_PROPERTIES.join(', ')}).`;
  }
  const missing = CREATE_PROPERTIES.find((property) => !(property in body));
  if (missing !== undefined) return `${missing} is required.`;
  const property = failedPath?.split('/')[1] ?? '';
  const name = (body as { name?: unknown }).name;
  if (property === 'name' && typeof name === 'string') {
    return nameProblem(name) ?? NAME_RULE;
  }
  const problem = settingProblem(property, (body as Record<string, unknown>)[property]);
  if (problem !== undefined) return problem;
  return propertyRule(property, maxExpiresInSeconds) ?? 'The body does not match name, level and expiresIn.';
}

/**
 * The operator's policy of a user (all four always present; null: none): a rate limit and credits all
 * of the user's keys share, the most live keys and the highest level of the user's keys. Key info
 * shows it, read-only, when the user has one.
 */
export const UserPolicy = t.Object(
  {
    ratelimit: t.Union([RateLimit, t.Null()]),
    credits: t.Union([Credits, t.Null()]),
    maxKeys: t.Union([Integer(1, 1_000_000, 'Replaces MAX_KEYS_PER_USER for the user.'), t.Null()]),
    maxLevel: t.Union([Integer(MIN_LEVEL, MAX_LEVEL, 'The highest level of the user’s keys.'), t.Null()]),
    permissions: t.Union([Permissions, t.Null()], {
      description:
        'The permissions the user’s keys may hold: every permission granted to one of them must be covered by one of these. null: any.',
    }),
  },
  { additionalProperties: false, title: 'UserPolicy' },
);
export type UserPolicy = typeof UserPolicy.static;

/** A key as list, get and update show it: never a secret or a hash. */
export const KeySummary = t.Object({
  key: t.String(),
  name: t.String(),
  level: WholeNumber(),
  userId: WholeNumber(),
  createdAt: t.String({ description: 'ISO 8601 UTC with milliseconds.' }),
  expiresAt: t.String({ description: 'ISO 8601 UTC with milliseconds.' }),
  enabled: t.Boolean(),
  lastUsedAt: t.Union([t.String(), t.Null()], {
    description:
      'The latest valid verification or /key authentication, ISO 8601 with milliseconds; null when never used. Written in batches: at most USAGE_FLUSH_SECONDS behind.',
  }),
  meta: t.Optional(KeyMeta),
  ratelimit: t.Optional(RateLimit),
  credits: t.Optional(Credits),
  permissions: t.Optional(Permissions),
  allowedIps: t.Optional(AllowedIps),
  policy: t.Optional(UserPolicy),
  leakedAt: t.Optional(
    t.String({
      description:
        'Present once the key’s secret was reported leaked (docs/leaks.md): when it was first reported, ISO 8601 with milliseconds.',
    }),
  ),
  leakSource: t.Optional(
    t.String({ description: 'Who first reported it: github:<where>, or the source given to /admin/leaks.' }),
  ),
  retiring: t.Optional(
    t.Literal(true, {
      description:
        'Present while the key is in its grace period after a rotation: it verifies until expiresAt, but acts on no key.',
    }),
  ),
});
export type KeySummary = typeof KeySummary.static;

export const KeyListResponse = t.Object({
  result: t.Literal('success'),
  apikeys: t.Array(KeySummary),
  nextCursor: t.Union([t.String(), t.Null()], {
    description: 'Pass as `cursor` for the next page; null on the last page.',
  }),
});

export const KeyResponse = t.Object({ result: t.Literal('success'), apikey: KeySummary });

export const UpdateKeyRequest = t.Object(
  {
    name: t.Optional(t.String({ description: 'As on create.' })),
    meta: t.Optional(
      t.Union([KeyMeta, t.Null()], { description: 'Replaces the metadata; null removes it.' }),
    ),
    enabled: t.Optional(t.Boolean()),
    level: t.Optional(Integer(MIN_LEVEL, MAX_LEVEL, 'At most the caller’s level.')),
    expiresIn: t.Optional(t.Number({ multipleOf: 1, minimum: 1, description: 'Seconds from now.' })),
    ratelimit: t.Optional(
      t.Union([RateLimit, t.Null()], { description: 'Replaces it (counts start afresh); null removes it.' }),
    ),
    credits: t.Optional(
      t.Union([Credits, t.Null()], {
        description: 'Replaces them (the refill clock restarts); null removes them.',
      }),
    ),
    permissions: t.Optional(
      t.Union([Permissions, t.Null()], {
        description: 'Replaces them (a grant: the caller must hold each); null removes them all.',
      }),
    ),
    allowedIps: t.Optional(
      t.Union([AllowedIps, t.Null()], {
        description: 'Replaces the list; null lets the key be used from anywhere.',
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1, title: 'UpdateKeyRequest' },
);

export const RotateBody = t.Object(
  {
    gracePeriod: t.Optional(
      t.Number({
        multipleOf: 1,
        minimum: 0,
        maximum: 2_592_000,
        description: 'Seconds the previous key keeps working (default 0: it stops at once).',
      }),
    ),
  },
  { additionalProperties: false },
);

export const RotatedResponse = t.Object({
  result: t.Literal('success'),
  apikey: ApiKeyView,
  previous: t.Object({ key: t.String(), expiresAt: t.String() }),
});

/** The named schemas of the newer endpoints, listed under components.schemas in the OpenAPI document. */
export const apiKeyModels = new Elysia({ name: 'keygate.apikey-models' }).model({
  KeySummary,
  KeyListResponse,
  KeyResponse,
  RotateBody,
  RotatedResponse,
  UpdateKeyRequest,
});
