// Hono: app.use('/api/*', keygate({ url })); the principal is c.get('keygate'). The client's address is
// the runtime's own peer address (Bun's server.requestIP, @hono/node-server's socket), never a header;
// on other runtimes, or behind a proxy, pass `clientIp: (c) => getConnInfo(c).remote.address`.
import type { Context, MiddlewareHandler } from 'hono';
import type { Principal } from './decision';
import { createGuard, type KeygateOptions } from './guard';

export type { Principal } from './decision';
export type KeygateHonoOptions = KeygateOptions<Context>;

declare module 'hono' {
  interface ContextVariableMap {
    keygate: Principal | null;
  }
}

export function keygate(options: KeygateHonoOptions): MiddlewareHandler {
  const guard = createGuard(options);
  return async (c, next) => {
    const decision = await guard({
      request: c,
      header: (name) => c.req.raw.headers.get(name),
      address: () => peerAddress(c),
    });
    if (!decision.pass) return new Response(decision.body, decision);
    for (const [name, value] of Object.entries(decision.headers)) c.header(name, value);
    c.set('keygate', decision.principal);
    await next();
  };
}

type PeerSources = {
  requestIP?: (request: Request) => { address: string } | null;
  server?: { requestIP?: (request: Request) => { address: string } | null };
  incoming?: { socket?: { remoteAddress?: string } };
};

function peerAddress(c: Context): string | undefined {
  const env = c.env as PeerSources | undefined;
  // Bun passes its server as Hono's env (app.fetch(request, server)); @hono/node-server the IncomingMessage.
  if (env?.requestIP) return env.requestIP(c.req.raw)?.address;
  if (env?.server?.requestIP) return env.server.requestIP(c.req.raw)?.address;
  return env?.incoming?.socket?.remoteAddress;
}
