import { type KeygateElysiaOptions, keygate } from '@keygate/client/elysia';
import { Elysia } from 'elysia';

export function createApp(options: KeygateElysiaOptions) {
  return new Elysia().use(keygate(options)).get('/api/whoami', ({ keygate }) => ({ principal: keygate }));
}

// Serve it: createApp({ url: 'http://127.0.0.1:3000', minLevel: 1 }).listen(8080);
