// The operator's credential for the /admin routes: a Bearer token from the configured key source
// (HS256, PEM or JWKS: the one JwtAuthority every token goes through) whose `scope` claim holds
// JWT_ADMIN_SCOPE. Its `sub` names the operator, any non-empty string (every audit line names its
// operator): it is no user id. Checked before the body, as every scheme: no credential of the admin
// scheme (none, or an API key's, which is another scheme) is 401, a token without the scope 403.
import { Elysia } from 'elysia';
import { readBearer, readKeyAndSecret } from '../auth/credentials';
import type { JwtAuthority } from '../auth/jwt';
import { HttpError } from '../http/errors';
import { contextOf } from '../http/request-context';

/** Who acts on the operator's routes; `by` names it in audit lines (`admin:<sub>`). */
export type Operator = { sub: string; by: string };

export const NEEDS_OPERATOR_TOKEN =
  "The operator's routes need a JSON Web Token with the admin scope: Authorization: Bearer <token>.";

export function operatorAuth(jwt: Pick<JwtAuthority, 'verify'>, adminScope: string) {
  const authenticate = async (request: Request): Promise<Operator> => {
    const credentials = readBearer(request.headers);
    if (credentials.kind === 'absent') {
      // An API key is the other scheme's credential, answered as a missing one (401), not as a bad admin credential.
      const message =
        readKeyAndSecret(request.headers).kind === 'absent'
          ? NEEDS_OPERATOR_TOKEN
          : `The operator's routes take a token with the scope ${adminScope}, not an API key.`;
      throw new HttpError(401, message, { 'www-authenticate': 'Bearer realm="keygate"' });
    }
    if (credentials.kind === 'malformed') throw new HttpError(403, 'The Authorization header is malformed.');
    const check = await jwt.verify(credentials.token);
    if (!check.ok) {
      contextOf(request).tokenRefusal = check.reason;
      throw new HttpError(403, 'The token is not valid.');
    }
    const { subject, subjectIsText, scopes } = check.identity;
    if (!scopes.includes(adminScope)) {
      throw new HttpError(403, `The token lacks the scope ${adminScope} that the operator's routes need.`);
    }
    if (!subjectIsText || subject === '') {
      throw new HttpError(
        403,
        "The operator's token needs a sub that names the operator: a non-empty string.",
      );
    }
    return { sub: subject, by: `admin:${subject}` };
  };
  return new Elysia().derive(
    { as: 'scoped' },
    async ({ request }): Promise<{ operator: Operator }> => ({ operator: await authenticate(request) }),
  );
}
