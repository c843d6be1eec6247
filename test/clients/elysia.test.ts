// The middleware table in Elysia, served by Bun.
import { createApp } from '../../examples/integrate/elysia';
import { runTable } from './table';

await runTable<Request>(
  'Elysia',
  async (options) => {
    const app = createApp(options).listen({ hostname: '127.0.0.1', port: 0 });
    return {
      url: `http://127.0.0.1:${app.server?.port}`,
      close: async () => {
        await app.stop(true);
      },
    };
  },
  (request) => request.method,
);
