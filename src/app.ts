// createApp wires the routes, the authentication schemes and the one error mapping; no logic here.
import { openapi } from '@elysiajs/openapi';
import { Elysia, ValidationError } from 'elysia';
import { createAuditLog } from './apikeys/audit';
import { describeCreateBodyProblem } from './apikeys/model';
import { apiKeyRoutes } from './apikeys/routes';
import type { ApiKeyService } from './apikeys/service';
import { type ApiKeyStore, StoreUnavailableError } from './apikeys/store';
import { forwardAuthRoutes } from './auth/forward-auth';
import type { JwtAuthority } from './auth/jwt';
import { jwtAuth, keyAuth } from './auth/plugin';
import type { Verifier } from './auth/verification';
import { verifyRoutes } from './auth/verify';
import { requestIdOf } from './http/edge';
import { errorResponse, HttpError } from './http/errors';
import type { Logger } from './log';
import { VERSION } from './version';

export type AppDeps = {
  service: ApiKeyService;
  store: Pick<ApiKeyStore, 'ping'>;
  jwt: JwtAuthority;
  verifier: Verifier;
  logger: Logger;
  basePath: string;
  maxExpiresInSeconds: number;
};

export function createApp({ service, store, jwt, verifier, logger, basePath, maxExpiresInSeconds }: AppDeps) {
  const routes = { service, maxExpiresInSeconds, audit: createAuditLog(logger) };
  // strictPath: the contract lists exact paths and answers 404 for every other, `/apikeys/jwt/` included.
  return new Elysia({ prefix: basePath, normalize: false, strictPath: true })
    .onError(({ code, error, request, path }) => {
      if (error instanceof HttpError) return errorResponse(error.status, error.message, error.headers);
      if (error instanceof ValidationError && error.type === 'body') {
        return errorResponse(
          400,
          describeCreateBodyProblem(error.value, error.valueError?.path, maxExpiresInSeconds),
        );
      }
      // The one path parameter fails validation only when it is not valid percent-encoding.
      if (error instanceof ValidationError && error.type === 'params') {
        return errorResponse(400, 'The key id in the path is not valid percent-encoding.');
      }
      if (code === 'NOT_FOUND') return errorResponse(404, `There is no ${request.method} ${path}.`);
      if (code === 'PARSE') return errorResponse(400, 'The body is not valid JSON.');
      const requestId = requestIdOf(request);
      if (error instanceof StoreUnavailableError) {
        logger.warn('database unavailable', { requestId, code: error.code });
        return errorResponse(503, 'The database is unavailable right now; try again shortly.', {
          'retry-after': '1',
        });
      }
      logger.error('unexpected error', {
        requestId,
        error: error instanceof Error ? error.stack : String(error),
      });
      return errorResponse(500, `Something went wrong on our side (request ${requestId ?? 'unknown'}).`);
    })
    .get(
      '/health',
      async () => {
        if (!(await store.ping())) throw new HttpError(503, 'The database does not answer.');
        return { status: 'ok' as const };
      },
      { detail: { summary: 'Health: 200 once the database answers', tags: ['Operations'] } },
    )
    .use(
      openapi({
        path: '/openapi',
        documentation: {
          info: { title: 'keygate', version: VERSION, description: 'Create and delete API keys.' },
          components: {
            securitySchemes: {
              bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
              basic: { type: 'http', scheme: 'basic' },
              apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
              apiSecret: { type: 'apiKey', in: 'header', name: 'X-API-Secret' },
            },
          },
        },
      }),
    )
    .use(apiKeyRoutes({ ...routes, suffix: 'jwt', auth: jwtAuth(jwt) }))
    .use(apiKeyRoutes({ ...routes, suffix: 'key', auth: keyAuth(service) }))
    .use(verifyRoutes(verifier))
    .use(forwardAuthRoutes(verifier));
}
