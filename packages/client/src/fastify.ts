// Fastify: app.addHook('preHandler', keygate({ url })); the principal is request.keygate. The client's
// address is request.ip, which follows the server's `trustProxy` setting.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Principal } from './decision';
import { createGuard, type KeygateOptions } from './guard';

export type { Principal } from './decision';
export type KeygateFastifyOptions = KeygateOptions<FastifyRequest>;

declare module 'fastify' {
  interface FastifyRequest {
    keygate?: Principal | null;
  }
}

export function keygate(options: KeygateFastifyOptions) {
  const guard = createGuard(options);
  return async function keygateHook(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const decision = await guard({
      request,
      header: (name) => {
        const value = request.headers[name];
        return Array.isArray(value) ? value[0] : value;
      },
      address: () => request.ip,
    });
    reply.headers(decision.headers);
    if (!decision.pass) return reply.code(decision.status).send(decision.body);
    request.keygate = decision.principal;
  };
}
