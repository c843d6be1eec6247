import { type KeygateElysiaOptions, keygate } from '@keygate/client/elysia';
import { Elysia } from 'elysia';

export function createApp(options: KeygateElysiaOptions) {
  return new Elysia().use(keygate(options)).get('/api/whoami', ({ keygate }) => ({ principal: keygate }));
}
