// The operator's routes (/admin): any user's keys and user policies, for the operator's own services.
// Thin handlers over the admin service; checks in the other routes' order: the operator's credential
// (the scheme's derive) → the path's format → the body or query → 404 → the rules' 403 and 409.
import { Elysia, t } from 'elysia';
import { apiKeyModels, ErrorResponse } from '../apikeys/model';
import { assertKeyId } from '../apikeys/routes';
import type { operatorAuth } from './operator-auth';
import type { AdminService } from './service';

export type AdminRoutesOptions = {
  auth: ReturnType<typeof operatorAuth>;
  admin: AdminService;
};

const KEY_PARAMS = t.Object({ id: t.String({ description: 'The `key` of the API key.' }) });
const OPERATOR_SECURITY = [{ bearer: [] }];
const errors = {
  400: ErrorResponse,
  401: ErrorResponse,
  403: ErrorResponse,
  404: ErrorResponse,
  503: ErrorResponse,
};

const describe = (summary: string, description: string) => ({
  summary,
  description: `Needs a token whose scope holds JWT_ADMIN_SCOPE. ${description}`,
  security: OPERATOR_SECURITY,
  tags: ['Operator'],
});

export function adminRoutes({ auth, admin }: AdminRoutesOptions) {
  return new Elysia()
    .use(apiKeyModels)
    .use(auth)
    .get(
      '/admin/apikeys/:id',
      async ({ operator, params }) => {
        assertKeyId(params.id);
        return { result: 'success' as const, apikey: await admin.getKey(operator, params.id) };
      },
      {
        params: KEY_PARAMS,
        response: { 200: 'KeyResponse', ...errors },
        detail: describe(
          'Get any API key',
          "Any user's live key, at any level; 404 for an expired or unknown key.",
        ),
      },
    );
}
