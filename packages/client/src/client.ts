// createClient({ url, token? }): one method per route of keygate's OpenAPI document, named by its
// operationId (routes.ts, generated), typed by openapi.d.ts (generated), plus short names for the
// routes an application calls most. A status other than 2xx throws a KeygateError.
import type { operations } from './openapi';
import { routes } from './routes';

/** keygate's answer to a call that did not succeed: its status and its error sentence and body. */
export class KeygateError extends Error {
  override readonly name = 'KeygateError';
  constructor(
    readonly status: number,
    message: string,
    readonly body: unknown,
    readonly headers: Headers,
  ) {
    super(message);
  }
}

type OperationId = keyof typeof routes & keyof operations;
type JsonOf<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type Responses<O> = O extends { responses: infer R } ? R : never;
type SuccessOf<O> = {
  [S in keyof Responses<O>]: S extends 200 | 201 | 204
    ? JsonOf<Responses<O>[S]> | (S extends 204 ? undefined : never)
    : never;
}[keyof Responses<O>];

// Each part is `never` when the route has none: its key is then left out of the call's options.
type PathOf<O> = O extends { parameters: { path: infer P } } ? ([P] extends [undefined] ? never : P) : never;
type QueryOf<O> = O extends { parameters: { query?: infer Q } }
  ? [Q] extends [undefined]
    ? never
    : Q
  : never;
type BodyOf<O> = O extends { requestBody: infer B } ? JsonOf<B> : never;
type OptionalBodyOf<O> = O extends { requestBody?: infer B } ? JsonOf<NonNullable<B>> : never;

export type CallOptions<O> = ([PathOf<O>] extends [never] ? unknown : { params: PathOf<O> }) &
  ([QueryOf<O>] extends [never] ? unknown : { query?: QueryOf<O> }) &
  ([BodyOf<O>] extends [never]
    ? [OptionalBodyOf<O>] extends [never]
      ? unknown
      : { body?: OptionalBodyOf<O> }
    : { body: BodyOf<O> }) & {
    /** Extra headers, e.g. a key's `authorization: Basic …` for the `/key` routes. */
    headers?: Record<string, string>;
    signal?: AbortSignal;
  };

type HasRequired<O> = Record<never, never> extends CallOptions<O> ? false : true;
type Method<O> =
  HasRequired<O> extends true
    ? (options: CallOptions<O>) => Promise<SuccessOf<O>>
    : (options?: CallOptions<O>) => Promise<SuccessOf<O>>;

export type KeygateClient = { [K in OperationId]: Method<operations[K]> } & {
  /** POST /apikeys/verify */
  verify: Method<operations['postApikeysVerify']>;
  /** GET /health */
  health: Method<operations['getHealth']>;
  /** POST /apikeys/jwt: a key for the token's user. */
  createKey: Method<operations['postApikeysJwt']>;
  /** GET /apikeys/jwt */
  listKeys: Method<operations['getApikeysJwt']>;
  /** GET /apikeys/{id}/jwt */
  getKey: Method<operations['getApikeysByIdJwt']>;
  /** PATCH /apikeys/{id}/jwt */
  updateKey: Method<operations['patchApikeysByIdJwt']>;
  /** POST /apikeys/{id}/rotate/jwt */
  rotateKey: Method<operations['postApikeysByIdRotateJwt']>;
  /** DELETE /apikeys/{id}/jwt */
  deleteKey: Method<operations['deleteApikeysByIdJwt']>;
  /** GET /apikeys/{id}/usage/jwt */
  keyUsage: Method<operations['getApikeysByIdUsageJwt']>;
};

const SHORT_NAMES = {
  verify: 'postApikeysVerify',
  health: 'getHealth',
  createKey: 'postApikeysJwt',
  listKeys: 'getApikeysJwt',
  getKey: 'getApikeysByIdJwt',
  updateKey: 'patchApikeysByIdJwt',
  rotateKey: 'postApikeysByIdRotateJwt',
  deleteKey: 'deleteApikeysByIdJwt',
  keyUsage: 'getApikeysByIdUsageJwt',
} as const satisfies Record<string, OperationId>;

type AnyCall = {
  params?: Record<string, string | number>;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
};

/** A client of the keygate at `url` (BASE_PATH included); `token` is sent as Bearer to every route. */
export function createClient({ url, token }: { url: string; token?: string }): KeygateClient {
  const base = url.replace(/\/+$/, '');
  const call =
    ([method, template]: readonly [string, string]) =>
    async (options: AnyCall = {}) => {
      const path = template.replace(/\{(\w+)\}/g, (_, name: string) =>
        encodeURIComponent(String(options.params?.[name] ?? '')),
      );
      const query = new URLSearchParams();
      for (const [name, value] of Object.entries(options.query ?? {})) {
        if (value !== undefined) query.set(name, String(value));
      }
      const headers: Record<string, string> = {};
      if (token !== undefined) headers.authorization = `Bearer ${token}`;
      if (options.body !== undefined) headers['content-type'] = 'application/json';
      const search = query.size > 0 ? `?${query}` : '';
      const response = await fetch(`${base}${path}${search}`, {
        method,
        headers: { ...headers, ...options.headers },
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal: options.signal,
      });
      const text = await response.text();
      const body: unknown = text === '' ? undefined : parseJson(text);
      if (response.ok) return body;
      const error = (body as { error?: unknown } | undefined)?.error;
      throw new KeygateError(
        response.status,
        typeof error === 'string' ? error : `keygate answered ${response.status}`,
        body,
        response.headers,
      );
    };
  const client: Record<string, unknown> = {};
  for (const [id, route] of Object.entries(routes)) client[id] = call(route);
  for (const [name, id] of Object.entries(SHORT_NAMES)) client[name] = client[id];
  return client as KeygateClient;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
