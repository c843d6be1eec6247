// The outermost layer of every request: a request id, the body-size guard, the host fix-up, the
// security and Keep-Alive headers, one log line (method, path, status, ms; never headers or bodies)
// and, when metrics are on, one observation by route template.
import type { TokenRefusal } from '../auth/jwt';
import type { Logger } from '../log';
import { BODY_TOO_LARGE, CLOSE, MAX_BODY_BYTES } from './body';
import { errorResponse } from './errors';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;
const requestIds = new WeakMap<Request, string>();
const routeTemplates = new WeakMap<Request, string>();
/** The route label of a request keygate did not route: an unknown path, or a 413 before routing. */
export const UNMATCHED_ROUTE = 'unmatched';
const tokenRefusals = new WeakMap<Request, TokenRefusal>();

/** The id given to a request, for error logs deeper down. */
export function requestIdOf(request: Request): string | undefined {
  return requestIds.get(request);
}

/** The router tells which template (`/apikeys/:id/jwt`) a request matched; metrics label by it. */
export function recordRouteTemplate(request: Request, template: string): void {
  routeTemplates.set(request, template);
}

/** Told once per answered request, after its response is ready. */
export type RequestObserver = (method: string, route: string, status: number, seconds: number) => void;

/** Why the request's token was refused, for its log line at LOG_LEVEL=debug (never the token). */
export function noteTokenRefusal(request: Request, reason: TokenRefusal): void {
  tokenRefusals.set(request, reason);
}

export function withHttpEdge(
  handle: (request: Request) => Response | Promise<Response>,
  logger: Logger,
  {
    bodyIgnoredUnder = [],
    explainTokenRefusals = false,
    observe,
    keepAlive,
  }: {
    /** Paths under these prefixes never read the body, so its declared size does not matter. */
    bodyIgnoredUnder?: readonly string[];
    /** Adds `tokenRefusal` to the request line (LOG_LEVEL=debug). */
    explainTokenRefusals?: boolean;
    /** Metrics: told about each answered request. */
    observe?: RequestObserver;
    /** The Keep-Alive header every response that keeps its connection advertises (serve). */
    keepAlive?: string;
  } = {},
): (request: Request) => Promise<Response> {
  return async (original) => {
    const started = performance.now();
    // Bun makes a new string on every read of `url`: read once.
    const originalUrl = original.url;
    const request = withRoutableHost(original, originalUrl);
    const given = request.headers.get('x-request-id');
    const id = given !== null && REQUEST_ID.test(given) ? given : crypto.randomUUID();
    requestIds.set(request, id);
    const url = request === original ? originalUrl : request.url;
    const pathStart = url.indexOf('/', url.indexOf('//') + 2);
    const queryStart = url.indexOf('?', pathStart);
    const length = Number(request.headers.get('content-length') ?? 0);
    // Refused before reading a byte of it (and before authentication): the declared size says enough.
    const response =
      length > MAX_BODY_BYTES && !ignoresBody(url.slice(pathStart), bodyIgnoredUnder)
        ? errorResponse(413, BODY_TOO_LARGE, CLOSE)
        : await handle(request);
    const headers = response.headers;
    headers.set('x-request-id', id);
    headers.set('x-content-type-options', 'nosniff');
    // Advertised so that clients and proxies close an idle connection before keygate does, rather
    // than race its close with a new request.
    if (keepAlive !== undefined && headers.get('connection') !== 'close')
      headers.set('keep-alive', keepAlive);
    const ms = performance.now() - started;
    const { method } = request;
    const status = response.status;
    observe?.(method, routeTemplates.get(request) ?? UNMATCHED_ROUTE, status, ms / 1000);
    const path = queryStart === -1 ? url.slice(pathStart) : url.slice(pathStart, queryStart);
    // The line's fields written as JSON directly (as JSON.stringify would, in this order): no object
    // per request for the logger to copy.
    const tokenRefusal = explainTokenRefusals ? tokenRefusals.get(request) : undefined;
    logger.infoJson(
      'request',
      `"requestId":${JSON.stringify(id)},"method":${JSON.stringify(method)},"path":${JSON.stringify(path)},` +
        `"status":${status},"ms":${Math.round(ms * 100) / 100}` +
        (tokenRefusal === undefined ? '' : `,"tokenRefusal":${JSON.stringify(tokenRefusal)}`),
    );
    return response;
  };
}

function ignoresBody(path: string, prefixes: readonly string[]): boolean {
  return prefixes.some(
    (prefix) => path.startsWith(prefix) && ['', '/', '?'].includes(path.charAt(prefix.length)),
  );
}

/**
 * Elysia finds the path by searching for "/" from a fixed offset (11), which assumes a host of at
 * least four characters: `Host: x` would route /apikeys/jwt as /jwt. Such requests, and those with no
 * host at all, get a stand-in host.
 */
function withRoutableHost(request: Request, url: string): Request {
  // Without a Host (HTTP/1.0, or an empty Host header) Bun gives the bare path as the URL.
  const schemeEnd = url.indexOf('//');
  const hostStart = schemeEnd === -1 ? 0 : schemeEnd + 2;
  const pathStart = url.indexOf('/', hostStart);
  if (schemeEnd !== -1 && pathStart >= 11) return request;
  const path = pathStart === -1 ? '/' : url.slice(pathStart);
  const scheme = schemeEnd === -1 ? 'http://' : url.slice(0, hostStart);
  return new Request(`${scheme}localhost${path}`, request);
}
