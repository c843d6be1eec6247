// The shapes of verify and forward-auth as `t` schemas: for the OpenAPI document (the routes read
// and write their bodies themselves, on the hot path).
import { Elysia, t } from 'elysia';
import { KeyMeta, WholeNumber } from '../apikeys/model';
import { MAX_LEVEL, MIN_LEVEL } from '../core/levels';

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
    subject: t.Optional(OwnerSubject),
  }),
  t.Object({
    type: t.Literal('jwt'),
    userId: WholeNumber(),
    level: WholeNumber(),
    expiresAt: t.String(),
    subject: t.Optional(TokenSubject),
  }),
]);

export const VerifyBody = t.Object(
  {
    key: t.Optional(t.String()),
    secret: t.Optional(t.String()),
    token: t.Optional(t.String()),
    minLevel: t.Optional(t.Number({ multipleOf: 1, minimum: MIN_LEVEL, maximum: MAX_LEVEL })),
  },
  {
    additionalProperties: false,
    description: 'Either key and secret, or token; minLevel optional.',
  },
);

export const VerifyResponse = t.Object({
  result: t.Literal('success'),
  valid: t.Boolean(),
  code: t.String({
    description:
      'VALID, NOT_FOUND, EXPIRED, DISABLED, INVALID_TOKEN, INSUFFICIENT_LEVEL, RATE_LIMITED or USAGE_EXCEEDED; treat any other as invalid.',
  }),
  principal: t.Optional(Principal),
});

export const ForwardAuthResponse = t.Object({ result: t.Literal('success'), principal: Principal });

/** The named schemas of verification, listed under components.schemas in the OpenAPI document. */
export const verificationModels = new Elysia({ name: 'keygate.verification-models' }).model({
  Principal,
  VerifyBody,
  VerifyResponse,
  ForwardAuthResponse,
});
