import { type KeygateFastifyOptions, keygate } from '@keygate/client/fastify';
import Fastify from 'fastify';

export function createApp(options: KeygateFastifyOptions) {
  const app = Fastify();
  app.addHook('preHandler', keygate(options));
  app.get('/api/whoami', async (request) => ({ principal: request.keygate }));
  return app;
}

// Serve it: await createApp({ url: 'http://127.0.0.1:3000', minLevel: 1 }).listen({ port: 8080 });
