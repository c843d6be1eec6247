// The middleware table around a plain fetch handler, served by Bun.
import { createHandler } from '../../examples/integrate/fetch';
import { runTable } from './table';

await runTable<Request>(
  'fetch',
  async (options) => {
    const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: createHandler(options) });
    return { url: `http://127.0.0.1:${server.port}`, close: () => server.stop(true) };
  },
  (request) => request.method,
);
