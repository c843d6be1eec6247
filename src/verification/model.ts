// The shapes of verify and forward-auth as `t` schemas: for the OpenAPI document (the routes read
// and write their bodies themselves, on the hot path).
import { Elysia, t } from 'elysia';
import { AllowedIps, KeyMeta, Permissions, WholeNumber } from '../apikeys/model';
import { MAX_LEVEL, MIN_LEVEL } from '../core/levels';
import { CREDITS_BOUNDS } from '../limits/credits';

const TokenSubject = t.String({
  description: "With JWT_USER_IDS=mapped: the token's sub, which userId was given to.",
});
const OwnerSubject = t.String({
  description: "With JWT_USER_IDS=mapped: the subject of the key's owner, when the owner has one.",
});

export const Principal = t.Union([
  t.Object({
    type: t.Literal('key'),
    key: t.String(),
    userId: WholeNumber(),
    level: WholeNumber(),
    name: t.String(),
    expiresAt: t.String(),
    meta: t.Optional(KeyMeta),
    permissions: t.Optional(Permissions),
    allowedIps: t.Optional(AllowedIps),
    subject: t.Optional(OwnerSubject),
  }),
  t.Object({
    type: t.Literal('jwt'),
    userId: WholeNumber(),
    level: WholeNumber(),
    expiresAt: t.String(),
    permissions: t.Optional(
      t.Array(t.String(), { description: "The entries of the token's scope claim, when it has any." }),
    ),
    subject: t.Optional(TokenSubject),
  }),
]);

export const VerifyBody = t.Object(
  {
    key: t.Optional(t.String()),
    secret: t.Optional(t.String()),
    token: t.Optional(t.String()),
    minLevel: t.Optional(t.Number({ multipleOf: 1, minimum: MIN_LEVEL, maximum: MAX_LEVEL })),
    cost: t.Optional(
      t.Number({
        multipleOf: 1,
        minimum: CREDITS_BOUNDS.cost.min,
        maximum: CREDITS_BOUNDS.cost.max,
        // No `default` keyword: generators (openapi-typescript's defaults) make a property with one
        // required, and a client must be able to leave cost out.
        description: `Credits a VALID answer takes from a key with credits (ignored for tokens); ${CREDITS_BOUNDS.cost.default} when left out.`,
      }),
    ),
    permissions: t.Optional(
      t.String({
        minLength: 1,
        maxLength: 1000,
        description:
          'A query the credential’s permissions must satisfy: names joined by AND and OR (AND binds tighter), with parentheses, e.g. "documents.read AND (billing.read OR admin)"; at most 100 names, no wildcards.',
      }),
    ),
    clientIp: t.Optional(
      t.String({
        description:
          'The address the credential is used from (IPv4 or IPv6). A key with allowedIps verified without it is IP_NOT_ALLOWED.',
      }),
    ),
  },
  {
    additionalProperties: false,
    description: 'Either key and secret, or token; minLevel, permissions, cost and clientIp optional.',
  },
);

const LimitScope = t.Union([t.Literal('key'), t.Literal('user'), t.Literal('operator')], {
  description: "Whose limit this is: the key's own, its user's policy, or the operator's RATE_LIMIT.",
});

export const RateLimitState = t.Object(
  {
    limit: WholeNumber(),
    duration: t.Number({ multipleOf: 1, description: 'The window, in seconds.' }),
    remaining: t.Number({ multipleOf: 1, description: 'Verifications that may pass now.' }),
    reset: t.String({
      description: 'When the whole limit is available again if none arrive (ISO 8601, ms).',
    }),
    scope: LimitScope,
  },
  {
    description:
      'VALID and RATE_LIMITED answers of a key under a rate limit: the binding limit (the refusing one, else the one with the fewer remaining).',
  },
);

export const CreditsState = t.Object(
  {
    remaining: t.Number({ multipleOf: 1, description: 'Credits left after this answer.' }),
    scope: LimitScope,
  },
  {
    description:
      'VALID and USAGE_EXCEEDED answers of a key with credits (its own, or its user policy’s): the binding pool, the refusing one, else the one with fewer remaining.',
  },
);

/** Every code verify answers with, in the order a key's verdict is reached (VALID last). */
export const VERIFY_CODES = [
  'NOT_FOUND',
  'INVALID_TOKEN',
  'EXPIRED',
  'DISABLED',
  'IP_NOT_ALLOWED',
  'INSUFFICIENT_LEVEL',
  'INSUFFICIENT_PERMISSIONS',
  'RATE_LIMITED',
  'USAGE_EXCEEDED',
  'VALID',
] as const;

export const VerifyResponse = t.Object({
  result: t.Literal('success'),
  valid: t.Boolean(),
  // UnionEnum would add `default` (its first value), which generators read as "always present".
  code: t.UnionEnum(VERIFY_CODES, {
    default: undefined,
    description:
      'The verdict. The list is open: a later keygate may add codes, and a client must treat any code it does not know as invalid.',
    'x-enum-open': true,
  }),
  principal: t.Optional(Principal),
  ratelimit: t.Optional(RateLimitState),
  credits: t.Optional(CreditsState),
  retryAfter: t.Optional(
    t.Number({
      multipleOf: 1,
      description:
        'RATE_LIMITED: whole seconds (at least 1) until a verification can pass; USAGE_EXCEEDED: until the next refill, when one will come.',
    }),
  ),
});

export const ForwardAuthResponse = t.Object({ result: t.Literal('success'), principal: Principal });

/** The named schemas of verification, listed under components.schemas in the OpenAPI document. */
export const verificationModels = new Elysia({ name: 'keygate.verification-models' }).model({
  Principal,
  RateLimitState,
  CreditsState,
  VerifyBody,
  VerifyResponse,
  ForwardAuthResponse,
});
