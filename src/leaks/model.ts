// The shapes of the leak endpoints as `t` schemas (the OpenAPI document's named schemas), and the
// body rules of /admin/leaks and GitHub's alerts, each problem said in one sentence.
import { Elysia, t } from 'elysia';

export const MAX_SECRETS_PER_REPORT = 100;
const MAX_SECRET_CHARACTERS = 256;
const MAX_SOURCE_CHARACTERS = 100;

const LeakOutcome = t.Union([t.Literal('disabled'), t.Literal('deleted'), t.Literal('notified')], {
  description: 'What the key got (LEAK_ACTION): disabled, deleted, or notified (nothing but the event).',
});

export const LeakReportRequest = t.Object(
  {
    secrets: t.Array(t.String({ minLength: 1, maxLength: MAX_SECRET_CHARACTERS }), {
      minItems: 1,
      maxItems: MAX_SECRETS_PER_REPORT,
      description: 'Secrets found by a scanner: 1 to 100 strings of 1 to 256 characters.',
    }),
    source: t.Optional(
      t.String({
        minLength: 1,
        maxLength: MAX_SOURCE_CHARACTERS,
        description:
          'Who found them (e.g. gitleaks), 1 to 100 characters without control characters; default admin.',
      }),
    ),
  },
  { additionalProperties: false, title: 'LeakReportRequest' },
);

export const LeakReportResponse = t.Object(
  {
    result: t.Literal('success'),
    found: t.Array(t.Object({ key: t.String(), action: LeakOutcome }), {
      description: 'Each live key a secret belonged to, in the order of the secrets.',
    }),
    notFound: t.Number({
      multipleOf: 1,
      description: 'How many distinct secrets belonged to no live key.',
    }),
  },
  { title: 'LeakReportResponse' },
);

export const GithubAlert = t.Object(
  {
    token: t.String({ description: 'The secret GitHub found.' }),
    type: t.Optional(t.String({ description: 'The token type registered with GitHub.' })),
    url: t.Optional(t.String({ description: 'Where GitHub found it.' })),
    source: t.Optional(t.String({ description: 'What kind of place: content, commit, npm, …' })),
  },
  { title: 'GithubSecretScanningAlert' },
);
export const GithubAlerts = t.Array(GithubAlert, { title: 'GithubSecretScanningAlerts' });

export const GithubFeedback = t.Array(
  t.Object({
    token_raw: t.String(),
    token_type: t.String(),
    label: t.Union([t.Literal('true_positive'), t.Literal('false_positive')], {
      description: 'true_positive: the secret of a live key, which got LEAK_ACTION.',
    }),
  }),
  { title: 'GithubSecretScanningFeedback' },
);

export const leakModels = new Elysia({ name: 'keygate.leak-models' }).model({
  LeakReportRequest,
  LeakReportResponse,
  GithubSecretScanningAlerts: GithubAlerts,
  GithubSecretScanningFeedback: GithubFeedback,
});

export type LeakReportInput = { secrets: string[]; source?: string };
export type GithubAlertInput = { token: string; type?: string; url?: string; source?: string };

/** A control character (Unicode Cc), as the key name's rule refuses (apikeys/model.ts). */
const hasControl = (text: string) => {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return true;
  }
  return false;
};

/** The /admin/leaks body's problem in one sentence, or undefined when it is fine. */
export function leakReportProblem(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return 'The body must be a JSON object with secrets (and optionally source).';
  }
  const extra = Object.keys(body).find((name) => name !== 'secrets' && name !== 'source');
  if (extra !== undefined) {
    return `Unknown property "${extra.slice(0, 40)}": the body takes only secrets and source.`;
  }
  const { secrets, source } = body as { secrets?: unknown; source?: unknown };
  if (
    !Array.isArray(secrets) ||
    secrets.length < 1 ||
    secrets.length > MAX_SECRETS_PER_REPORT ||
    !secrets.every(
      (secret) => typeof secret === 'string' && secret.length >= 1 && secret.length <= MAX_SECRET_CHARACTERS,
    )
  ) {
    return `secrets must be an array of 1 to ${MAX_SECRETS_PER_REPORT} strings of 1 to ${MAX_SECRET_CHARACTERS} characters.`;
  }
  if (
    source !== undefined &&
    (typeof source !== 'string' ||
      source.length < 1 ||
      source.length > MAX_SOURCE_CHARACTERS ||
      hasControl(source))
  ) {
    return `source must be a string of 1 to ${MAX_SOURCE_CHARACTERS} characters without control characters.`;
  }
  return undefined;
}

/** GitHub's alerts, or the 400 sentence for a body that is not a list of them. */
export function githubAlertsProblem(body: unknown): string | undefined {
  const optionalText = (value: unknown) => value === undefined || typeof value === 'string';
  const isAlert = (item: unknown) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return false;
    const { token, type, url, source } = item as Record<string, unknown>;
    return typeof token === 'string' && optionalText(type) && optionalText(url) && optionalText(source);
  };
  if (!Array.isArray(body) || !body.every(isAlert)) {
    return 'The body must be a JSON array of {"token","type","url","source"} objects, token a string.';
  }
  return undefined;
}
