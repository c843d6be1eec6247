// POST /apikeys/verify: no caller authentication; the body carries the credential to check, and a
// well-formed body always gets 200 with a code (it tells the holder only what using it would).
import { Elysia } from 'elysia';
import { apiKeyModels, ErrorResponse, isLevel, VerifyBody } from '../apikeys/model';
import { raiseBodyProblem, readJsonBody } from '../http/body';
import { HttpError } from '../http/errors';
import type { OnVerdict, Verifier } from './verification';

type Credential = { key: string; secret: string; minLevel: number } | { token: string; minLevel: number };

export function verifyRoutes(verifier: Verifier, onVerdict?: OnVerdict) {
  return new Elysia().use(apiKeyModels).post(
    '/apikeys/verify',
    async ({ request }) => {
      const body = await readJsonBody(request);
      raiseBodyProblem(body); // no caller to authenticate first: a bad body is refused at once
      const credential = credentialOf(body);
      const verdict =
        'token' in credential
          ? await verifier.verifyToken(credential.token, credential.minLevel, request)
          : await verifier.verifyKey(credential.key, credential.secret, credential.minLevel);
      onVerdict?.('token' in credential ? 'jwt' : 'key', verdict.code);
      // A finished Response: Elysia then neither merges headers nor checks the body against
      // VerifyResponse (that schema is for the document; the verdict's shape is fixed by its type,
      // and the tests pin every body exactly).
      return new Response(JSON.stringify({ result: 'success', ...verdict }), { headers: VERIFY_HEADERS });
    },
    {
      // The hot path: the handler reads and checks the body itself, so Elysia runs no parser,
      // transform or schema check on it (+12% verifies a second; bench/RESULTS.md, History). The body's
      // schema is named in the document below.
      parse: 'none',
      response: { 200: 'VerifyResponse', 400: ErrorResponse, 413: ErrorResponse },
      detail: {
        summary: 'Verify a key and secret, or a token',
        description:
          'No caller authentication. Always 200 for a well-formed body: valid true with code VALID, or valid false with NOT_FOUND, EXPIRED, INVALID_TOKEN or INSUFFICIENT_LEVEL.',
        tags: ['Verification'],
        requestBody: {
          description: VerifyBody.description,
          content: { 'application/json': { schema: { $ref: '#/components/schemas/VerifyBody' } } },
          required: true,
        },
      },
    },
  );
}

const VERIFY_HEADERS = { 'content-type': 'application/json', 'cache-control': 'no-store' };

const FORMS = 'send either key and secret, or token, each with an optional minLevel';

/** The credential in a verify body, or a 400 naming the first problem. */
export function credentialOf(body: unknown): Credential {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(400, `The body must be a JSON object: ${FORMS}.`);
  }
  const fields = body as Record<string, unknown>;
  const extra = Object.keys(fields).find((name) => !['key', 'secret', 'token', 'minLevel'].includes(name));
  if (extra !== undefined) {
    throw new HttpError(400, `Unknown property "${extra.slice(0, 40)}": ${FORMS}.`);
  }
  for (const name of ['key', 'secret', 'token'] as const) {
    if (name in fields && typeof fields[name] !== 'string')
      throw new HttpError(400, `${name} must be a string.`);
  }
  if ('minLevel' in fields && !isLevel(fields.minLevel)) {
    throw new HttpError(400, 'minLevel must be an integer from 0 to 8.');
  }
  const minLevel = (fields.minLevel as number | undefined) ?? 0;
  const hasKey = 'key' in fields || 'secret' in fields;
  const hasToken = 'token' in fields;
  if (hasKey && hasToken) throw new HttpError(400, `Both forms were sent: ${FORMS}.`);
  if (hasToken) return { token: fields.token as string, minLevel };
  if (!('key' in fields) || !('secret' in fields)) {
    throw new HttpError(400, hasKey ? 'key and secret go together: send both.' : `No credential: ${FORMS}.`);
  }
  return { key: fields.key as string, secret: fields.secret as string, minLevel };
}
