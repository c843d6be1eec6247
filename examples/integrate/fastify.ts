import { type KeygateFastifyOptions, keygate } from '@keygate/client/fastify';
import Fastify from 'fastify';

export function createApp(options: KeygateFastifyOptions) {
  const app = Fastify();
  app.addHook('preHandler', keygate(options));
  app.get('/api/whoami', async (request) => ({ principal: request.keygate }));
  return app;
}
