// The middleware table in Hono, served by Bun.
import type { Context } from 'hono';
import { createApp } from '../../examples/integrate/hono';
import { runTable } from './table';

await runTable<Context>(
  'Hono',
  async (options) => {
    const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: createApp(options).fetch });
    return { url: `http://127.0.0.1:${server.port}`, close: () => server.stop(true) };
  },
  (c) => c.req.method,
);
