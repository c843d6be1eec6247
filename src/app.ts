// createApp wires the routes, the authentication schemes and the one error mapping; no logic here.
// It answers through Elysia, except the verification routes, which the edge answers directly.
import { Elysia, ValidationError } from 'elysia';
import { createAdminAudit } from './admin/audit';
import type { LookupStore } from './admin/lookup-store';
import { operatorAuth } from './admin/operator-auth';
import { adminRoutes } from './admin/routes';
import { createAdminService } from './admin/service';
import { allKeyEvents, createAuditLog, type KeyEvents } from './apikeys/audit';
import { keyAuth } from './apikeys/key-auth';
import { ErrorResponse, HealthResponse } from './apikeys/model';
import { apiKeyRoutes } from './apikeys/routes';
import type { ApiKeyService } from './apikeys/service';
import { type ApiKeyStore, StoreUnavailableError } from './apikeys/store';
import type { JwtAuthority } from './auth/jwt';
import { jwtAuth } from './auth/schemes';
import type { SubjectStore, UserIdMode } from './auth/subjects';
import type { TokenUsers } from './auth/token-users';
import type { LeakAction } from './config';
import type { Clock } from './core/clock';
import { DomainError } from './core/errors';
import { errorFields, type Logger } from './core/log';
import { MAX_BODY_BYTES } from './http/body';
import type { DirectRoute } from './http/edge';
import { domainErrorResponse, errorResponse, HttpError } from './http/errors';
import { openApiDocument } from './http/openapi';
import { referencePage } from './http/reference-page';
import { contextOf } from './http/request-context';
import { createUnavailableLog } from './http/unavailable-log';
import type { GithubKeySet } from './leaks/github-keys';
import {
  adminLeakRoutes,
  GITHUB_ALERTS_PATH,
  GITHUB_MAX_BODY_BYTES,
  githubAlertRoutes,
} from './leaks/routes';
import { createLeakService, type OnLeak } from './leaks/service';
import type { PolicyService } from './policies/service';
import { type ConsolePageOptions, consoleSecurityHeaders } from './sessions/console-page';
import { consoleRoutes } from './sessions/console-routes';
import { sessionLinkRoutes } from './sessions/link-routes';
import type { SessionService } from './sessions/service';
import { operatorActingForUserAuth, operatorSessionAuth, userSessionAuth } from './sessions/session-auth';
import type { UsageRecorder } from './usage/counter';
import { usageRoutes } from './usage/routes';
import type { UsageService } from './usage/service';
import {
  FORWARD_AUTH_PATH,
  type ForwardAuthOptions,
  forwardAuthAnswer,
  forwardAuthRoutes,
} from './verification/forward-auth';
import type { OnVerdict, Verifier } from './verification/verdict';
import { VERIFY_PATH, verifyAnswer, verifyRoutes } from './verification/verify';
import { VERSION } from './version';
import { webhookRoutes } from './webhooks/routes';
import type { WebhookService } from './webhooks/service';

export type AppDeps = {
  service: ApiKeyService;
  store: Pick<
    ApiKeyStore,
    'ping' | 'deleteKeysOfUser' | 'findKeysBySecretHashes' | 'updateKey' | 'deleteKey'
  >;
  /** Tokens verified and mapped to their users, for the JWT scheme. */
  tokens: TokenUsers;
  /** The operator's routes (/admin): tokens whose scope holds `scope`, verified by `jwt`. */
  operators: { jwt: Pick<JwtAuthority, 'verify'>; scope: string };
  /** With JWT_USER_IDS=mapped: the subjects' user ids, for GET /admin/subjects. */
  mappedSubjects?: Pick<SubjectStore, 'findUserId'>;
  /** The operator's user policies (/admin/users/:userId/policy). */
  policies: PolicyService;
  /** The operator's queries across every user (/admin/users, /admin/apikeys, /admin/overview). */
  lookups: LookupStore;
  verifier: Verifier;
  /** Forward-auth's route rules and what a request no rule matches gets. */
  forwardAuth: Pick<ForwardAuthOptions, 'rules' | 'unmatched'>;
  /** The client's address: the TCP peer, or behind TRUSTED_PROXIES the forwarded one. */
  clientAddress: ForwardAuthOptions['clientAddress'];
  /** The usage history (GET /apikeys/:id/usage/…) and what counts a /key authentication as a last use. */
  usage: UsageService;
  usageCounter?: UsageRecorder;
  clock: Clock;
  logger: Logger;
  basePath: string;
  maxExpiresInSeconds: number;
  /** Metrics: the outcome of each verify (`verify`) and forward-auth (`forward_auth`) check. */
  onVerification?: (path: 'verify' | 'forward_auth', ...outcome: Parameters<OnVerdict>) => void;
  /** Metrics: tell the edge which route template each request matched (off: no hook on any route). */
  recordRouteTemplates?: boolean;
  /** Metrics: told of each committed change to keys, as the audit log is. */
  keyEvents?: KeyEvents;
  /** Leaked secrets: SECRET_PREFIX, LEAK_ACTION, the hook told of each leak, GitHub's keys when on. */
  leaks: {
    secretPrefix: string;
    action: LeakAction;
    onLeak: OnLeak;
    /** With GITHUB_SECRET_SCANNING=on: the keys that sign GitHub's alerts (else no /leaks/github). */
    github?: GithubKeySet;
  };
  /** The console's sessions (revoke-all ends them). */
  sessions: SessionService;
  /** The console and its session routes; undefined (CONSOLE=off): every console path 404. */
  console?: { page: ConsolePageOptions; publicUrl: string | undefined; userIds: UserIdMode };
  /** The operator's webhook endpoints (/admin/webhooks). */
  webhooks: WebhookService;
  webhookAllowPrivate: boolean;
};

export function createApp({
  service,
  store,
  tokens,
  operators,
  mappedSubjects,
  policies,
  lookups,
  verifier,
  forwardAuth: forwardAuthRules,
  clientAddress,
  usage,
  usageCounter,
  clock,
  logger,
  basePath,
  maxExpiresInSeconds,
  onVerification,
  recordRouteTemplates = false,
  keyEvents,
  leaks,
  sessions,
  console: consoleOptions,
  webhooks,
  webhookAllowPrivate,
}: AppDeps) {
  const routes = { service, maxExpiresInSeconds, events: allKeyEvents(createAuditLog(logger), keyEvents) };
  const unavailable = createUnavailableLog(logger, clock);
  /** The one error mapping: an HttpError or a domain error as its JSON answer; anything else as 500, logged. */
  const answerError = (error: unknown, requestId: string | undefined): Response => {
    if (error instanceof HttpError) return errorResponse(error.status, error.message, error.headers);
    if (error instanceof DomainError) {
      if (error instanceof StoreUnavailableError) {
        unavailable.record(requestId, error.code);
      }
      return domainErrorResponse(error);
    }
    logger.error('unexpected error', { requestId, ...errorFields(error) });
    return errorResponse(500, `Something went wrong on our side (request ${requestId ?? 'unknown'}).`);
  };
  const verify = verifyAnswer(
    verifier,
    // Named parameters, not a rest and a spread: no array made per verification.
    onVerification && ((scheme, code) => onVerification('verify', scheme, code)),
  );
  const forwardAuth = forwardAuthAnswer(
    verifier,
    { ...forwardAuthRules, clientAddress, pathPrefix: `${basePath}${FORWARD_AUTH_PATH}` },
    onVerification && ((scheme, code) => onVerification('forward_auth', scheme, code)),
  );
  const keyScheme = keyAuth(service, { usage: usageCounter, clientAddress });
  const operatorScheme = operatorAuth(operators.jwt, operators.scope);
  const leakService = createLeakService({
    store,
    apikeys: service,
    clock,
    secretPrefix: leaks.secretPrefix,
    action: leaks.action,
    events: routes.events,
    onLeak: leaks.onLeak,
  });
  const admin = createAdminService({
    apikeys: service,
    usage,
    subjects: mappedSubjects,
    lookups,
    policyOf: policies.policyOf,
    sessions,
    clock,
  });
  const adminOptions = {
    admin,
    policies,
    events: routes.events,
    audit: createAdminAudit(logger),
    maxExpiresInSeconds,
    clock,
  };
  // strictPath: the contract lists exact paths and answers 404 for every other, `/apikeys/jwt/` included.
  const app = new Elysia({ prefix: basePath, normalize: false, strictPath: true });
  // Built from every route of `app` on first request, so routes added below are all in it.
  const openApi = openApiDocument(app, {
    basePath,
    info: { title: 'keygate', version: VERSION, description: 'Create, manage and verify API keys.' },
    tags: [
      { name: 'API keys', description: 'Create, list, get, rotate and delete API keys.' },
      { name: 'Verification', description: 'Verify a credential, or forward-auth for a reverse proxy.' },
      { name: 'Operations', description: 'Health.' },
      { name: 'Leaks', description: "Leaked secrets reported by GitHub's secret scanning." },
      { name: 'Console', description: 'One-time links to the web console (CONSOLE=on).' },
      {
        name: 'Operator',
        description:
          "Any user's keys and user policies, for the operator's own services (a token with the admin scope).",
      },
      {
        name: 'Webhooks',
        description:
          'Endpoints that receive signed events about keys (Standard Webhooks), and their messages (a token with the admin scope).',
      },
    ],
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
      basic: { type: 'http', scheme: 'basic' },
      apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
      apiSecret: { type: 'apiKey', in: 'header', name: 'X-API-Secret' },
    },
  });
  if (recordRouteTemplates) {
    // In the first hook (transform), so requests that then fail authentication or the body are still
    // counted under their route. Only with metrics on: every route runs it (~0.7 µs a request).
    app.onTransform({ as: 'global' }, ({ request, route }) => {
      contextOf(request).route = route.slice(basePath.length);
    });
  }
  app
    .onError(({ code, error, request, path, route }) => {
      if (recordRouteTemplates && route) contextOf(request).route = route.slice(basePath.length);
      // A route with a body schema words its own problems (its `error` hook, which runs after this one).
      if (error instanceof ValidationError && error.type === 'body') return;
      // The one path parameter fails validation only when it is not valid percent-encoding.
      if (error instanceof ValidationError && error.type === 'params') {
        return errorResponse(400, 'The key id in the path is not valid percent-encoding.');
      }
      if (code === 'NOT_FOUND') {
        // The root is where a newcomer looks first: point them to the reference.
        const hint =
          path === `${basePath}/` || path === basePath ? ` The API reference is at ${basePath}/openapi.` : '';
        return errorResponse(404, `There is no ${request.method} ${path}.${hint}`);
      }
      if (code === 'PARSE') return errorResponse(400, 'The body is not valid JSON.');
      return answerError(error, contextOf(request).id);
    })
    .get(
      '/health',
      async () => {
        if (!(await store.ping())) {
          throw new HttpError(503, 'The database does not answer.', { 'retry-after': '1' });
        }
        return { status: 'ok' as const };
      },
      {
        response: { 200: HealthResponse, 503: ErrorResponse },
        detail: { summary: 'Health: 200 once the database answers', tags: ['Operations'] },
      },
    )
    .get('/openapi/json', () => openApi(), { detail: { hide: true } })
    .use(referencePage())
    .use(apiKeyRoutes({ ...routes, suffix: 'jwt', auth: jwtAuth(tokens) }))
    .use(apiKeyRoutes({ ...routes, suffix: 'key', auth: keyScheme }))
    .use(usageRoutes({ suffix: 'jwt', auth: jwtAuth(tokens), apikeys: service, usage, clock }))
    .use(usageRoutes({ suffix: 'key', auth: keyScheme, apikeys: service, usage, clock }))
    .use(adminRoutes({ ...adminOptions, auth: operatorScheme }))
    .use(adminLeakRoutes({ auth: operatorScheme, leaks: leakService }))
    // Off: an unknown path, as any other.
    .use(leaks.github ? githubAlertRoutes({ keys: leaks.github, leaks: leakService }) : new Elysia())
    .use(webhookRoutes({ auth: operatorScheme, webhooks, allowPrivate: webhookAllowPrivate }))
    // In Elysia for the document (and for any caller without the edge); the edge answers them first.
    .use(verifyRoutes(verify))
    .use(forwardAuthRoutes(forwardAuth));
  if (consoleOptions !== undefined) {
    const { publicUrl } = consoleOptions;
    const userSession = userSessionAuth({ sessions, publicUrl });
    const operatorActingFor = operatorActingForUserAuth({ sessions, publicUrl });
    const operatorSession = operatorSessionAuth({ sessions, publicUrl });
    app.use(sessionLinkRoutes({ tokenAuth: jwtAuth(tokens), operatorScheme, sessions, logger })).use(
      consoleRoutes({
        sessions,
        policies,
        page: consoleOptions.page,
        publicUrl,
        basePath,
        maxExpiresInSeconds,
        userIds: consoleOptions.userIds,
        // The same route builders and services as the API's, behind the session cookie.
        api: [
          apiKeyRoutes({ ...routes, suffix: 'session', auth: userSession }),
          usageRoutes({ suffix: 'session', auth: userSession, apikeys: service, usage, clock }),
          adminRoutes({ ...adminOptions, auth: operatorSession }),
          webhookRoutes({ auth: operatorSession, webhooks, allowPrivate: webhookAllowPrivate }),
        ],
        // The operator acting for one user, through the owner's routes (rotate has no /admin route).
        operatorApi: [
          apiKeyRoutes({ ...routes, suffix: 'session', auth: operatorActingFor }),
          usageRoutes({ suffix: 'session', auth: operatorActingFor, apikeys: service, usage, clock }),
        ],
      }),
    );
  }
  const consolePrefix = `${basePath}/console`;
  const consoleHeaders = consoleOptions && consoleSecurityHeaders(consoleOptions.page.frameAncestors);
  /** Every console answer, errors included, carries the console's CSP and its other headers. */
  const withConsoleHeaders = (request: Request, response: Response): Response => {
    if (consoleHeaders === undefined) return response;
    const { pathname } = new URL(request.url);
    if (pathname !== consolePrefix && !pathname.startsWith(`${consolePrefix}/`)) return response;
    for (const [name, value] of Object.entries(consoleHeaders)) response.headers.set(name, value);
    return response;
  };

  const verifyRoute: DirectRoute = { template: VERIFY_PATH, readsBody: true, answer: verify };
  const forwardAuthRoute: DirectRoute = {
    template: FORWARD_AUTH_PATH,
    readsBody: false,
    answer: forwardAuth,
  };
  const forwardAuthSubRoute: DirectRoute = { ...forwardAuthRoute, template: `${FORWARD_AUTH_PATH}/*` };
  const verifyPath = `${basePath}${VERIFY_PATH}`;
  const githubAlertsPath = `${basePath}${GITHUB_ALERTS_PATH}`;
  const forwardAuthPath = `${basePath}${FORWARD_AUTH_PATH}`;
  return {
    /** Every request but the direct routes'. */
    fetch:
      consoleHeaders === undefined
        ? (request: Request) => app.fetch(request)
        : async (request: Request) => withConsoleHeaders(request, await app.fetch(request)),
    /** The verification routes, answered by the edge without Elysia: the paths Elysia would match. */
    directRoute(method: string, path: string): DirectRoute | undefined {
      if (path === verifyPath) return method === 'POST' ? verifyRoute : undefined;
      if (!path.startsWith(forwardAuthPath)) return undefined;
      if (path.length === forwardAuthPath.length) return forwardAuthRoute;
      return path.charCodeAt(forwardAuthPath.length) === SLASH ? forwardAuthSubRoute : undefined;
    },
    answerError,
    /** GitHub's alert batches may be larger than keygate's own bodies (leaks/routes.ts says why). */
    bodyLimit(method: string, path: string): number {
      return leaks.github && method === 'POST' && path === githubAlertsPath
        ? GITHUB_MAX_BODY_BYTES
        : MAX_BODY_BYTES;
    },
  };
}

const SLASH = 0x2f;
