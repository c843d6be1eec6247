// The outermost layer of every request: a request id, the body-size guard, the host fix-up, the
// security and Keep-Alive headers, one log line (method, path, status, ms; never headers or bodies)
// and, when metrics are on, one observation by route template. The verification routes, which
// backends and proxies call for every request they guard, are answered here directly (DirectRoute);
// every other request goes on to Elysia.
import { jsonStringOf, type Logger } from '../core/log';
import { andThen, type SyncOrAsync } from '../core/sync-or-async';
import { BODY_TOO_LARGE, CLOSE, MAX_BODY_BYTES } from './body';
import { errorResponse } from './errors';
import {
  newRequestContext,
  type PeerSource,
  type RequestContext,
  registerRequestContext,
} from './request-context';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** The route label of a request keygate did not route: an unknown path, or a 413 before routing. */
export const UNMATCHED_ROUTE = 'unmatched';

/** Told once per answered request, after its response is ready. */
export type RequestObserver = (method: string, route: string, status: number, seconds: number) => void;

/**
 * A route the edge answers itself, before Elysia's router: the same answer with less work per
 * request (bench/HISTORY.md). `answer` is given the query (the text after `?`, or '') and
 * the headers the edge owes this answer (request id, nosniff, Keep-Alive), to send among its own. It
 * may throw, or reject: the edge then answers as the app answers that error (`answerError`).
 */
export type DirectRoute = {
  /** Its label in metrics. */
  template: string;
  /** False when the body is never read: then its declared size does not matter. */
  readsBody: boolean;
  answer(
    request: Request,
    query: string,
    headers: Record<string, string>,
    context: RequestContext,
  ): SyncOrAsync<Response>;
};

/** The text after `?` in a URL, or '' without one: what a direct route is given as its query. */
export function queryOf(url: string): string {
  const queryStart = url.indexOf('?');
  return queryStart === -1 ? '' : url.slice(queryStart + 1);
}

export type EdgeOptions = {
  /** The direct route for a method and path (the path as sent, without its query), if any. */
  directRoute: (method: string, path: string) => DirectRoute | undefined;
  /** How the app answers an error (the direct routes' errors are answered the same way). */
  answerError: (error: unknown, requestId: string) => Response;
  /** Adds `tokenRefusal` to the request line (LOG_LEVEL=debug). */
  explainTokenRefusals?: boolean;
  /** Metrics: told about each answered request. */
  observe?: RequestObserver;
  /** The Keep-Alive header every response that keeps its connection advertises (serve). */
  keepAlive?: string;
  /** The largest body a path takes, for the few routes that take more than MAX_BODY_BYTES. */
  bodyLimit?: (method: string, path: string) => number;
};

export function withHttpEdge(
  handle: (request: Request) => SyncOrAsync<Response>,
  logger: Logger,
  {
    directRoute,
    answerError,
    explainTokenRefusals = false,
    observe,
    keepAlive,
    bodyLimit = () => MAX_BODY_BYTES,
  }: EdgeOptions,
): (request: Request, server?: PeerSource) => SyncOrAsync<Response> {
  // A line's method and path, as JSON: written anew only when they differ from the last line's.
  const methodJson = jsonStringOf();
  const pathJson = jsonStringOf();
  /** The request line and the observation; the edge's headers too unless the route sent them. */
  const finish = (
    request: Request,
    context: RequestContext,
    started: number,
    path: string,
    response: Response,
    headersSent: boolean,
  ): Response => {
    const { id } = context;
    if (!headersSent) {
      const headers = response.headers;
      headers.set('x-request-id', id);
      headers.set('x-content-type-options', 'nosniff');
      // Advertised so that clients and proxies close an idle connection before keygate does, rather
      // than race its close with a new request.
      if (keepAlive !== undefined && headers.get('connection') !== 'close')
        headers.set('keep-alive', keepAlive);
    }
    const ms = performance.now() - started;
    const { method } = request;
    const status = response.status;
    observe?.(method, context.route ?? UNMATCHED_ROUTE, status, ms / 1000);
    // The line's fields written as JSON directly (as JSON.stringify would, in this order): no object
    // per request for the logger to copy. The id needs no escaping: REQUEST_ID's characters, or a UUID.
    const tokenRefusal = explainTokenRefusals ? context.tokenRefusal : undefined;
    logger.infoJson(
      'request',
      `"requestId":"${id}","method":${methodJson(method)},"path":${pathJson(path)},` +
        `"status":${status},"ms":${Math.round(ms * 100) / 100}` +
        (tokenRefusal === undefined ? '' : `,"tokenRefusal":${JSON.stringify(tokenRefusal)}`),
    );
    return response;
  };

  /** A direct route's answer, given the edge's headers; its errors answered as the app's. */
  const answerDirectly = (
    route: DirectRoute,
    request: Request,
    context: RequestContext,
    started: number,
    path: string,
    query: string,
  ): SyncOrAsync<Response> => {
    const { id } = context;
    context.route = route.template;
    const headers: Record<string, string> =
      keepAlive === undefined
        ? { 'x-request-id': id, 'x-content-type-options': 'nosniff' }
        : { 'x-request-id': id, 'x-content-type-options': 'nosniff', 'keep-alive': keepAlive };
    const failed = (error: unknown) => finish(request, context, started, path, answerError(error, id), false);
    let answer: SyncOrAsync<Response>;
    try {
      answer = route.answer(request, query, headers, context);
    } catch (error) {
      return failed(error);
    }
    return answer instanceof Promise
      ? answer.then((response) => finish(request, context, started, path, response, true), failed)
      : finish(request, context, started, path, answer, true);
  };

  return (original, server) => {
    const started = performance.now();
    // Bun makes a new string on every read of `url`: read once.
    const originalUrl = original.url;
    const request = withRoutableHost(original, originalUrl);
    const given = request.headers.get('x-request-id');
    const context = newRequestContext(
      request,
      given !== null && REQUEST_ID.test(given) ? given : crypto.randomUUID(),
      server,
      original,
    );
    const url = request === original ? originalUrl : request.url;
    const pathStart = url.indexOf('/', url.indexOf('//') + 2);
    const queryStart = url.indexOf('?', pathStart);
    const path = queryStart === -1 ? url.slice(pathStart) : url.slice(pathStart, queryStart);
    const route = directRoute(request.method, path);
    // Refused before reading a byte of it (and before authentication): the declared size says enough.
    // Forward-auth never reads its body: its declared size is not even looked up.
    const declared =
      route === undefined || route.readsBody ? Number(request.headers.get('content-length') ?? 0) : 0;
    if (declared > MAX_BODY_BYTES) {
      const limit = route === undefined ? bodyLimit(request.method, path) : MAX_BODY_BYTES;
      if (declared > limit) {
        const message = limit === MAX_BODY_BYTES ? BODY_TOO_LARGE : `The body is larger than ${limit} bytes.`;
        return finish(request, context, started, path, errorResponse(413, message, CLOSE), false);
      }
    }
    if (route !== undefined) {
      const query = queryStart === -1 ? '' : url.slice(queryStart + 1);
      return answerDirectly(route, request, context, started, path, query);
    }
    registerRequestContext(request, context);
    return andThen(handle(request), (answered) => finish(request, context, started, path, answered, false));
  };
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
