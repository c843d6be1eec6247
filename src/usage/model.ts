// The shapes of the usage endpoint as `t` schemas: for the response check and the OpenAPI document.
import { Elysia, t } from 'elysia';
import { WholeNumber } from '../apikeys/model';

export const UsageBucket = t.Object({
  start: t.String({ description: 'The start of the UTC hour or day, ISO 8601 with milliseconds.' }),
  valid: WholeNumber(),
  rateLimited: WholeNumber(),
  usageExceeded: WholeNumber(),
  denied: t.Number({
    multipleOf: 1,
    description: 'Attempts that failed otherwise: wrong secret, expired, disabled, level below minLevel.',
  }),
});

export const UsageResponse = t.Object({
  result: t.Literal('success'),
  key: t.String(),
  granularity: t.Union([t.Literal('hour'), t.Literal('day')]),
  usage: t.Array(UsageBucket, { description: 'Ascending; only buckets with a count.' }),
});

/** The named schemas of usage, listed under components.schemas in the OpenAPI document. */
export const usageModels = new Elysia({ name: 'keygate.usage-models' }).model({ UsageBucket, UsageResponse });
