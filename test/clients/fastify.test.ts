// The middleware table in Fastify, served by node:http under Bun.
import type { FastifyRequest } from 'fastify';
import { createApp } from '../../examples/integrate/fastify';
import { runTable } from './table';

await runTable<FastifyRequest>(
  'Fastify',
  async (options) => {
    const app = createApp(options);
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    return { url, close: () => app.close() };
  },
  (request) => request.method,
);
