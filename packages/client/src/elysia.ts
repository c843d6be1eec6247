// Elysia: app.use(keygate({ url })); the handler's context has `keygate`, the principal. The client's
// address is the server's peer address (server.requestIP): Elysia has no trusted-proxy setting, so
// behind a proxy pass `clientIp: (request) => …` from the proxy's header you trust.
import { Elysia } from 'elysia';
import type { Principal } from './decision';
import { createGuard, type KeygateOptions } from './guard';

export type { Principal } from './decision';
export type KeygateElysiaOptions = KeygateOptions<Request>;

export function keygate(options: KeygateElysiaOptions) {
  const guard = createGuard(options);
  return new Elysia().resolve({ as: 'scoped' }, async ({ request, server, set }) => {
    const decision = await guard({
      request,
      header: (name) => request.headers.get(name),
      address: () => server?.requestIP(request)?.address,
    });
    Object.assign(set.headers, decision.headers);
    if (!decision.pass) throw new Response(decision.body, decision);
    return { keygate: decision.principal as Principal | null };
  });
}
