// What every middleware does before it writes an answer: read the credential as keygate does,
// ask keygate's verify with the configured requirements and a timeout, and decide (decision.ts).
import { type Decision, decide, type Outcome } from './decision';

/** The middleware's options; `R` is what the framework calls a request (see each adapter). */
export type KeygateOptions<R> = {
  /** keygate's base URL, BASE_PATH included: `http://127.0.0.1:3000`. */
  url: string;
  /** The level the credential must have (0..8). */
  minLevel?: number;
  /** A permission query (`documents.read AND documents.write`), or a function of the request giving one. */
  permissions?: string | ((request: R) => string | undefined);
  /** Credits a pass takes from a key with credits (keygate's default: 1). */
  cost?: number;
  /** Let requests through, with no principal, when keygate cannot answer. Default false: 503. */
  failOpen?: boolean;
  /** Milliseconds to wait for keygate before answering 503 (default 2000). */
  timeoutMs?: number;
  /**
   * The client's address sent to keygate (keys with `allowedIps`): by default the framework's own,
   * trusted-proxy-aware address; a function to take it from elsewhere; `false` to send none (keys
   * with `allowedIps` are then refused, and a keygate before `clientIp` existed accepts the body).
   */
  clientIp?: false | ((request: R) => string | undefined);
};

export const DEFAULT_TIMEOUT_MS = 2000;
/** Calls to keygate that start within this many ms of each other share one timeout timer… */
const TIMEOUT_SLICE_MS = 10;
/** …and at most this many of them (a signal's abort listeners stay few on every runtime). */
const CALLS_PER_TIMEOUT = 100;
/** A credential longer than this is refused here: verify's body would be over keygate's 16 KiB. */
const MAX_CREDENTIAL_LENGTH = 8192;

type Credential = { key: string; secret: string } | { token: string };

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
const BASIC = /^Basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i;

/**
 * The credential in the headers, as keygate reads it: `Authorization: Bearer` (a token),
 * `Authorization: Basic` (key:secret), else `X-API-Key` with `X-API-Secret`.
 */
export function readCredential(header: (name: string) => string | undefined | null): Credential | Outcome {
  const authorization = header('authorization');
  if (authorization) {
    if (/^bearer(\s|$)/i.test(authorization)) {
      const token = BEARER.exec(authorization)?.[1];
      return token ? { token } : { kind: 'malformed' };
    }
    if (/^basic(\s|$)/i.test(authorization)) return parseBasic(authorization);
  }
  const key = header('x-api-key');
  const secret = header('x-api-secret');
  if (!key && !secret) return { kind: 'missing' };
  if (!key || !secret) return { kind: 'malformed' };
  return { key, secret };
}

function parseBasic(authorization: string): Credential | Outcome {
  const encoded = BASIC.exec(authorization)?.[1];
  if (!encoded || encoded.length % 4 !== 0) return { kind: 'malformed' };
  const decoded = atob(encoded);
  const colon = decoded.indexOf(':');
  if (colon <= 0 || colon === decoded.length - 1) return { kind: 'malformed' };
  return { key: decoded.slice(0, colon), secret: decoded.slice(colon + 1) };
}

/** What a framework file hands the guard about one request. */
export type RequestFacts<R> = {
  request: R;
  header: (name: string) => string | undefined | null;
  /** The framework's own address of the client, used unless `clientIp` says otherwise. */
  address: () => string | undefined;
};

/** The guard for `options`: one request's facts in, the decision out. */
export function createGuard<R>(options: KeygateOptions<R>): (facts: RequestFacts<R>) => Promise<Decision> {
  const verifyUrl = `${options.url.replace(/\/+$/, '')}/apikeys/verify`;
  const timeout = sharedTimeouts(options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const failOpen = options.failOpen === true;
  return async ({ request, header, address }) => {
    const credential = readCredential(header);
    if ('kind' in credential) return decide(credential, failOpen);
    if (
      ('token' in credential ? credential.token : credential.key + credential.secret).length >
      MAX_CREDENTIAL_LENGTH
    ) {
      return decide({ kind: 'malformed' }, failOpen);
    }
    const permissions =
      typeof options.permissions === 'function' ? options.permissions(request) : options.permissions;
    const clientIp =
      options.clientIp === false ? undefined : options.clientIp ? options.clientIp(request) : address();
    const body = {
      ...credential,
      minLevel: options.minLevel,
      cost: 'token' in credential ? undefined : options.cost,
      permissions: permissions || undefined,
      clientIp: clientIp || undefined,
    };
    return decide(await askKeygate(verifyUrl, body, timeout()), failOpen);
  };
}

/**
 * The signals that end calls to keygate after `timeoutMs`. A timer for every call cost a guarded
 * request a tenth of its CPU (bench/middleware.ts), so the calls that start within the same
 * TIMEOUT_SLICE_MS share one: each call is given between `timeoutMs` and `timeoutMs` + TIMEOUT_SLICE_MS.
 */
export function sharedTimeouts(timeoutMs: number, now = () => performance.now()): () => AbortSignal {
  let signal: AbortSignal | undefined;
  let renewAt = 0;
  let calls = 0;
  return () => {
    const at = now();
    if (signal === undefined || at >= renewAt || calls >= CALLS_PER_TIMEOUT) {
      signal = AbortSignal.timeout(timeoutMs + TIMEOUT_SLICE_MS);
      renewAt = at + TIMEOUT_SLICE_MS;
      calls = 0;
    }
    calls++;
    return signal;
  };
}

/** One verify call: its answer, keygate's refusal of the call (4xx), or unavailable (5xx, no answer, late). */
async function askKeygate(url: string, body: object, signal: AbortSignal): Promise<Outcome> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
  } catch {
    return { kind: 'unavailable' };
  }
  try {
    if (response.status >= 500) {
      const retryAfter = Number(response.headers.get('retry-after'));
      await response.arrayBuffer(); // read whole, so that the connection stays open for the next call
      return {
        kind: 'unavailable',
        retryAfter: Number.isInteger(retryAfter) && retryAfter > 0 ? retryAfter : undefined,
      };
    }
    const json = (await response.json()) as { result?: string; error?: string; code?: unknown };
    if (response.status !== 200)
      return { kind: 'refused', error: String(json.error ?? `status ${response.status}`) };
    if (typeof json.code !== 'string') return { kind: 'unavailable' };
    return { kind: 'answer', answer: json as never };
  } catch {
    // The body did not arrive whole (or in time), or is not JSON: no answer to act on.
    return { kind: 'unavailable' };
  }
}
