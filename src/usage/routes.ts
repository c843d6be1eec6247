// GET /apikeys/:id/usage/{jwt,key}: one key's usage history, by UTC hour or day. Checks in order:
// credentials (the scheme's derive) → the `:id` format → the query → 404 → 403 (those two as get).
import { Elysia, t } from 'elysia';
import { ErrorResponse } from '../apikeys/model';
import { assertKeyId } from '../apikeys/routes';
import type { ApiKeyService } from '../apikeys/service';
import type { AuthScheme } from '../auth/schemes';
import type { Clock } from '../core/clock';
import { HttpError } from '../http/errors';
import { QUERY_PARAMETERS } from '../http/openapi';
import { usageModels } from './model';
import { DAY_MS, type Granularity, type UsageCounts, type UsageService } from './service';

/** The defaults and the longest spans a query may ask for, per granularity. */
export const SPANS: Record<Granularity, { defaultMs: number; maxMs: number; rule: string }> = {
  hour: { defaultMs: DAY_MS, maxMs: 31 * DAY_MS, rule: '31 days of hours' },
  day: { defaultMs: 30 * DAY_MS, maxMs: 366 * DAY_MS, rule: '366 days of days' },
};

const SCHEME_DOC: Record<
  'jwt' | 'key' | 'session',
  { security: Record<string, string[]>[]; scheme: string }
> = {
  jwt: { security: [{ bearer: [] }], scheme: 'a JSON Web Token' },
  key: { security: [{ basic: [] }, { apiKey: [], apiSecret: [] }], scheme: 'an API key and its secret' },
  session: { security: [], scheme: "the console's session cookie" },
};

export function usageRoutes({
  suffix,
  auth,
  apikeys,
  usage,
  clock,
}: {
  /** `session`: the console's, under /console/api. */
  suffix: 'jwt' | 'key' | 'session';
  auth: AuthScheme;
  apikeys: Pick<ApiKeyService, 'getKey'>;
  usage: Pick<UsageService, 'history'>;
  clock: Clock;
}) {
  const doc = SCHEME_DOC[suffix];
  return new Elysia()
    .use(usageModels)
    .use(auth)
    .get(
      `/apikeys/:id/usage/${suffix}`,
      async ({ caller, params, request }) => {
        assertKeyId(params.id);
        const query = usageQueryOf(request.url, clock());
        // 404 for another user's, an expired or an unknown key; 403 above the caller's level.
        await apikeys.getKey(caller, params.id);
        const buckets = await usage.history(params.id, query);
        return {
          result: 'success' as const,
          key: params.id,
          granularity: query.granularity,
          usage: bucketsView(buckets),
        };
      },
      {
        params: t.Object({ id: t.String({ description: 'The `key` of the API key.' }) }),
        response: {
          200: 'UsageResponse',
          400: ErrorResponse,
          401: ErrorResponse,
          403: ErrorResponse,
          404: ErrorResponse,
          503: ErrorResponse,
        },
        detail: {
          summary: `Usage history of one of your API keys (${suffix})`,
          description: `Authenticated by ${doc.scheme}. Verifications of the key per UTC hour or day: valid, rateLimited, usageExceeded, and denied (wrong secret, expired, disabled, level below minLevel). Counts this process has not written yet are included. 404 and 403 as for get.`,
          security: doc.security,
          tags: ['API keys'],
          [QUERY_PARAMETERS]: [
            {
              name: 'granularity',
              in: 'query',
              required: false,
              schema: { type: 'string', enum: ['hour', 'day'], default: 'hour' },
            },
            {
              name: 'since',
              in: 'query',
              required: false,
              description: 'ISO 8601; default: until minus 24 hours (hour) or 30 days (day).',
              schema: { type: 'string' },
            },
            {
              name: 'until',
              in: 'query',
              required: false,
              description: 'ISO 8601; default: now. At most 31 days after since for hour, 366 for day.',
              schema: { type: 'string' },
            },
          ],
        },
      },
    );
}

/** Buckets as the usage answers show them: each with the ISO start of its hour or day. */
export function bucketsView(buckets: UsageCounts[]) {
  return buckets.map(({ bucket, valid, rateLimited, usageExceeded, denied }) => ({
    start: new Date(bucket).toISOString(),
    valid,
    rateLimited,
    usageExceeded,
    denied,
  }));
}

export type UsageQuery = { granularity: Granularity; since: number; until: number };

/** `granularity`, `since` and `until`, each at most once; anything else is a 400. */
export function usageQueryOf(url: string, now: number): UsageQuery {
  const queryStart = url.indexOf('?');
  const params = new URLSearchParams(queryStart === -1 ? '' : url.slice(queryStart + 1));
  let granularity: Granularity = 'hour';
  let since: number | undefined;
  let until: number | undefined;
  const seen = new Set<string>();
  for (const [name, value] of params) {
    if (seen.has(name)) throw new HttpError(400, `The query parameter ${name.slice(0, 40)} is given twice.`);
    seen.add(name);
    if (name === 'granularity') {
      if (value !== 'hour' && value !== 'day') throw new HttpError(400, 'granularity must be hour or day.');
      granularity = value;
    } else if (name === 'since' || name === 'until') {
      const instant = isoInstant(value);
      if (instant === undefined) {
        throw new HttpError(
          400,
          `${name} must be an ISO 8601 date (2026-11-22) or date-time with a time zone (2026-11-22T10:00:00Z).`,
        );
      }
      if (name === 'since') since = instant;
      else until = instant;
    } else {
      throw new HttpError(
        400,
        `Unknown query parameter "${name.slice(0, 40)}": only granularity, since and until.`,
      );
    }
  }
  const span = SPANS[granularity];
  until ??= now;
  since ??= until - span.defaultMs;
  if (since > until) throw new HttpError(400, 'since must not be after until.');
  if (until - since > span.maxMs) {
    throw new HttpError(400, `since and until may span at most ${span.rule}.`);
  }
  return { granularity, since, until };
}

// A date, or a date-time with a time zone (Z or ±hh:mm); seconds and their fraction are optional.
const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2}))?$/;

/** The instant (ms) an ISO 8601 text names, or undefined when it is not one (2026-02-30 is not). */
export function isoInstant(text: string): number | undefined {
  const match = ISO_8601.exec(text);
  if (match === null) return undefined;
  const [, year, month, day, hour = '0', minute = '0', second = '0', fraction = '0', zone = 'Z'] = match;
  const fields = [year, month, day, hour, minute, second].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const [y, mo, d, h, mi, s] = fields;
  if (mo < 1 || mo > 12 || h > 23 || mi > 59 || s > 59 || d < 1) return undefined;
  // setUTCFullYear, not Date.UTC, which reads years 0–99 as 1900–1999.
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  // A day past the month's end (30 February) rolls over into the next month: refused.
  if (date.getUTCDate() !== d) return undefined;
  const local =
    date.getTime() + ((h * 60 + mi) * 60 + s) * 1000 + Number(fraction.padEnd(3, '0').slice(0, 3));
  if (zone === 'Z') return local;
  const [zoneHours, zoneMinutes] = zone.slice(1).split(':').map(Number) as [number, number];
  if (zoneHours > 23 || zoneMinutes > 59) return undefined;
  const offset = (zoneHours * 60 + zoneMinutes) * 60_000;
  return zone.startsWith('+') ? local - offset : local + offset;
}
