// The API-key endpoints of one authentication scheme: thin handlers over the service.
import { Elysia, t } from 'elysia';
import type { AuthScheme } from '../auth/plugin';
import { raiseBodyProblem, readJsonBody } from '../http/body';
import { CreatedResponse, createKeyBody, ErrorResponse } from './model';
import type { ApiKeyService } from './service';

export type ApiKeyRoutesOptions = {
  /** `jwt` or `key`: the last path segment, naming the scheme. */
  suffix: 'jwt' | 'key';
  auth: AuthScheme;
  service: ApiKeyService;
  maxExpiresInSeconds: number;
};

const SCHEME_DOC: Record<'jwt' | 'key', { security: Record<string, string[]>[]; scheme: string }> = {
  jwt: { security: [{ bearer: [] }], scheme: 'a JSON Web Token' },
  key: { security: [{ basic: [] }, { apiKey: [], apiSecret: [] }], scheme: 'an API key and its secret' },
};

export function apiKeyRoutes({ suffix, auth, service, maxExpiresInSeconds }: ApiKeyRoutesOptions) {
  const doc = SCHEME_DOC[suffix];
  const body = createKeyBody(maxExpiresInSeconds);
  const errors = { 400: ErrorResponse, 401: ErrorResponse, 403: ErrorResponse, 404: ErrorResponse };
  return new Elysia()
    .use(auth)
    .post(
      `/apikeys/${suffix}`,
      async ({ caller, body, set }) => {
        const apikey = await service.createKey(caller, body);
        set.status = 201;
        set.headers['cache-control'] = 'no-store';
        return { result: 'success' as const, apikey };
      },
      {
        // readJsonBody always returns, so Elysia never reaches the built-in 'application/json' parser
        // listed after it; the name is there for the OpenAPI document's request content type.
        parse: [({ request }) => readJsonBody(request), 'application/json'],
        transform: ({ body }) => raiseBodyProblem(body),
        body,
        response: { 201: CreatedResponse, ...errors, 409: ErrorResponse, 413: ErrorResponse },
        detail: {
          summary: `Create an API key (${suffix})`,
          description: `Authenticated by ${doc.scheme}. The secret is in this response only.`,
          security: doc.security,
          tags: ['API keys'],
        },
      },
    )
    .delete(
      `/apikeys/:id/${suffix}`,
      async ({ caller, params, set }) => {
        await service.revokeKey(caller, params.id);
        set.status = 204;
      },
      {
        params: t.Object({ id: t.String({ description: 'The `key` of the API key to delete.' }) }),
        response: { 204: t.Void(), ...errors },
        detail: {
          summary: `Delete an API key (${suffix})`,
          description: `Authenticated by ${doc.scheme}. Only the caller's own keys, up to its level.`,
          security: doc.security,
          tags: ['API keys'],
        },
      },
    );
}
