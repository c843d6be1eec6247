// The middleware table in Express, served by node:http under Bun.
import type { AddressInfo } from 'node:net';
import type { Request } from 'express';
import { createApp } from '../../examples/integrate/express';
import { runTable } from './table';

await runTable<Request>(
  'Express',
  async (options) => {
    const server = createApp(options).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const { port } = server.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}`,
      close: () => new Promise<void>((resolve) => server.close(() => resolve())),
    };
  },
  (req) => req.method,
);
