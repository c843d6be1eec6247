// The leak endpoints: GitHub's secret scanning alerts (POST /leaks/github, only with
// GITHUB_SECRET_SCANNING=on) and any other scanner's findings through the operator
// (POST /admin/leaks). Thin: the signature and the body are checked here, the rules are the service's.
//
// GitHub's receiver checks in this order, each failure leaving before anything is done: both
// signature headers present (else 401, the body unread), the key they name known (fetched from
// GITHUB_SECRET_SCANNING_KEYS_URL; 401 for an unknown one, 503 while no key could ever be fetched),
// the body read up to GITHUB_MAX_BODY_BYTES, the signature over those raw bytes (401), then the JSON.
import { Elysia } from 'elysia';
import type { operatorAuth } from '../admin/operator-auth';
import { ErrorResponse } from '../apikeys/model';
import { READ_BODY_IN_TRANSFORM } from '../apikeys/routes';
import { jsonOfBytes, readBodyBytes, readJsonBody } from '../http/body';
import { HttpError } from '../http/errors';
import { contextOf } from '../http/request-context';
import { type GithubKeySet, GithubKeysUnavailable } from './github-keys';
import {
  type GithubAlertInput,
  githubAlertsProblem,
  type LeakReportInput,
  leakModels,
  leakReportProblem,
} from './model';
import type { LeakOutcome, LeakService } from './service';

export const GITHUB_ALERTS_PATH = '/leaks/github';
/**
 * GitHub sends up to about 1,000 tokens in one request, each {"token","type","url","source"} of at
 * most a few hundred bytes: about 0.5 MB. 1 MiB takes such a batch with room to spare; keygate's own
 * 16 KiB is for its own bodies, whose size it decides.
 */
export const GITHUB_MAX_BODY_BYTES = 1024 * 1024;

const KEY_ID_HEADER = 'github-public-key-identifier';
const SIGNATURE_HEADER = 'github-public-key-signature';
const UNSIGNED = { 'www-authenticate': 'Github-Public-Key-Signature realm="keygate"' };

const BY_GITHUB = 'github';

export function githubAlertRoutes({ keys, leaks }: { keys: GithubKeySet; leaks: LeakService }) {
  return new Elysia().use(leakModels).post(
    GITHUB_ALERTS_PATH,
    async ({ body, request }) => {
      const alerts = body as GithubAlertInput[];
      const outcomes = await leaks.reportLeaks(
        alerts.map((alert) => ({ secret: alert.token, url: alert.url ?? null, source: sourceOf(alert) })),
        { source: 'github', by: BY_GITHUB, requestId: contextOf(request).id },
      );
      return alerts.map((alert, i) => ({
        token_raw: alert.token,
        token_type: alert.type ?? '',
        label: (outcomes[i]?.length ?? 0) > 0 ? ('true_positive' as const) : ('false_positive' as const),
      }));
    },
    {
      parse: READ_BODY_IN_TRANSFORM,
      transform: async (context) => {
        const headers = context.request.headers;
        const keyId = headers.get(KEY_ID_HEADER);
        const signature = headers.get(SIGNATURE_HEADER);
        if (!keyId || !signature) {
          throw new HttpError(
            401,
            'The alert needs the Github-Public-Key-Identifier and Github-Public-Key-Signature headers.',
            UNSIGNED,
          );
        }
        const key = await keys.keyOf(keyId).catch((error: unknown) => {
          if (!(error instanceof GithubKeysUnavailable)) throw error;
          throw new HttpError(503, "GitHub's signing keys cannot be fetched right now; try again shortly.", {
            'retry-after': '30',
          });
        });
        if (key === undefined) {
          throw new HttpError(401, 'GitHub lists no signing key of that identifier.', UNSIGNED);
        }
        const bytes = await readBodyBytes(context.request, GITHUB_MAX_BODY_BYTES);
        if (!keys.verifies(key, bytes, signature)) {
          throw new HttpError(401, 'The signature does not match the body.', UNSIGNED);
        }
        const alerts = jsonOfBytes(bytes);
        const problem = githubAlertsProblem(alerts);
        if (problem !== undefined) throw new HttpError(400, problem);
        (context as { body: unknown }).body = alerts;
      },
      body: 'GithubSecretScanningAlerts',
      response: {
        200: 'GithubSecretScanningFeedback',
        400: ErrorResponse,
        401: ErrorResponse,
        413: ErrorResponse,
        503: ErrorResponse,
      },
      detail: {
        summary: "Receive GitHub's secret scanning alerts",
        description:
          'Served with GITHUB_SECRET_SCANNING=on (else 404). Signed by GitHub: ECDSA P-256 with SHA-256 over the raw body, the base64 DER signature in Github-Public-Key-Signature, the key named by Github-Public-Key-Identifier among those at GITHUB_SECRET_SCANNING_KEYS_URL; a missing or wrong signature is 401 and changes nothing. Each token that is the secret of a live key gets LEAK_ACTION. Bodies up to 1 MiB (GitHub batches up to about 1,000 tokens).',
        tags: ['Leaks'],
        parameters: [
          { name: 'Github-Public-Key-Identifier', in: 'header', required: true, schema: { type: 'string' } },
          { name: 'Github-Public-Key-Signature', in: 'header', required: true, schema: { type: 'string' } },
        ],
      },
    },
  );
}

/** `github:` and where GitHub found the token (content, commit, npm…), or `github` when it does not say. */
function sourceOf(alert: GithubAlertInput): string {
  return alert.source ? `github:${alert.source.slice(0, 60)}` : 'github';
}

export function adminLeakRoutes({
  auth,
  leaks,
}: {
  auth: ReturnType<typeof operatorAuth>;
  leaks: LeakService;
}) {
  return new Elysia()
    .use(leakModels)
    .use(auth)
    .post(
      '/admin/leaks',
      async ({ operator, body, request }) => {
        const { secrets, source = 'admin' } = body;
        const outcomes = await leaks.reportLeaks(
          secrets.map((secret) => ({ secret, url: null })),
          { source, by: operator.by, requestId: contextOf(request).id },
        );
        // Each distinct secret once, at its first place in the list.
        const found: Array<{ key: string; action: LeakOutcome }> = [];
        const seen = new Set<string>();
        let notFound = 0;
        secrets.forEach((secret, i) => {
          if (seen.has(secret)) return;
          seen.add(secret);
          const keys = outcomes[i] ?? [];
          if (keys.length === 0) notFound++;
          found.push(...keys);
        });
        return { result: 'success' as const, found, notFound };
      },
      {
        parse: READ_BODY_IN_TRANSFORM,
        transform: async (context) => {
          const body = await readJsonBody(context.request);
          const problem = leakReportProblem(body);
          if (problem !== undefined) throw new HttpError(400, problem);
          context.body = body as LeakReportInput;
        },
        body: 'LeakReportRequest',
        response: {
          200: 'LeakReportResponse',
          400: ErrorResponse,
          401: ErrorResponse,
          403: ErrorResponse,
          413: ErrorResponse,
          503: ErrorResponse,
        },
        detail: {
          summary: 'Report leaked secrets',
          description:
            'Needs a token whose scope holds JWT_ADMIN_SCOPE. Secrets found by any scanner (gitleaks, TruffleHog, …): each that is the secret of a live key gets LEAK_ACTION, an audit line apikey.leaked and the key.leaked event.',
          security: [{ bearer: [] }],
          tags: ['Operator'],
        },
      },
    );
}
