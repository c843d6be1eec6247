// The one request context: what the edge knows of a request (its id, its connection's signal, its
// TCP peer) and
// what the layers below tell it back for the request's log line and metrics (the route template it
// matched, why a token was refused). The edge makes it; the direct routes are handed it, and routes
// answered through Elysia find it by their Request (Elysia passes nothing else through).

export type RequestContext = {
  /** The X-Request-Id given (when well-formed) or made up; in every log line of the request. */
  readonly id: string;
  /** Aborts when the client's connection closes: a write not yet committed is then dropped. */
  readonly signal: AbortSignal;
  /** The TCP peer's address as the server saw it; undefined when the request came without a socket. */
  readonly peer: string | undefined;
  /** The route template matched (`/apikeys/:id/jwt`), for metrics. */
  route?: string;
  /** Why the request's token was refused, for its log line at LOG_LEVEL=debug (never the token). */
  tokenRefusal?: string;
};

/** What tells a request's TCP peer: Bun's server (`requestIP`), or a stand-in in tests. */
export type PeerSource = { requestIP(request: Request): { address: string } | null };

const contexts = new WeakMap<Request, RequestContext>();

class EdgeContext implements RequestContext {
  route?: string;
  tokenRefusal?: string;
  constructor(
    readonly id: string,
    private readonly request: Request,
    private readonly peers: PeerSource | undefined,
    /** The request as the server handed it (the edge may have made another, with a routable host). */
    private readonly received: Request,
  ) {}

  // Read only by writes: `request.signal` costs ~2 µs, which a verification need not pay. A getter
  // of the class, not of each context (an object literal's own getter makes every context slower).
  get signal(): AbortSignal {
    return this.request.signal;
  }

  // Read only for a key that has allowedIps: asking the server costs, most requests need not.
  get peer(): string | undefined {
    return this.peers?.requestIP(this.received)?.address;
  }
}

/** The edge's context for `request`. */
export function newRequestContext(
  request: Request,
  id: string,
  peers?: PeerSource,
  received: Request = request,
): RequestContext {
  return new EdgeContext(id, request, peers, received);
}

/** Makes `context` the one `contextOf(request)` finds (for requests Elysia answers). */
export function registerRequestContext(request: Request, context: RequestContext): void {
  contexts.set(request, context);
}

/**
 * The context of a request answered through Elysia. A request that did not come through the edge
 * (a test calling the app directly) gets one of its own.
 */
export function contextOf(request: Request): RequestContext {
  let context = contexts.get(request);
  if (context === undefined) {
    context = newRequestContext(request, crypto.randomUUID());
    registerRequestContext(request, context);
  }
  return context;
}
