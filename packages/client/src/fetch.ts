// A plain fetch handler: withKeygate({ url }, (request, principal) => Response). The client's address
// is the server's peer address when the runtime passes it (Bun: server.requestIP; Deno: info.remoteAddr).
import type { Principal } from './decision';
import { createGuard, type KeygateOptions } from './guard';

export type { Principal } from './decision';
export type KeygateFetchOptions = KeygateOptions<Request>;

type PeerInfo = {
  requestIP?: (request: Request) => { address: string } | null;
  remoteAddr?: { hostname?: string };
};

export function withKeygate<Info = unknown>(
  options: KeygateFetchOptions,
  handler: (request: Request, principal: Principal | null, info?: Info) => Response | Promise<Response>,
): (request: Request, info?: Info) => Promise<Response> {
  const guard = createGuard(options);
  return async (request, info) => {
    const decision = await guard({
      request,
      header: (name) => request.headers.get(name),
      address: () => peerAddress(request, info as PeerInfo | undefined),
    });
    if (!decision.pass) return new Response(decision.body, decision);
    const response = await handler(request, decision.principal, info);
    try {
      for (const [name, value] of Object.entries(decision.headers)) response.headers.set(name, value);
    } catch {
      // A response taken from fetch() has immutable headers: it goes out as it came.
    }
    return response;
  };
}

function peerAddress(request: Request, info: PeerInfo | undefined): string | undefined {
  if (typeof info?.requestIP === 'function') return info.requestIP(request)?.address;
  return info?.remoteAddr?.hostname;
}
