import { type KeygateHonoOptions, keygate } from '@keygate/client/hono';
import { Hono } from 'hono';

export function createApp(options: KeygateHonoOptions) {
  const app = new Hono();
  app.use('/api/*', keygate(options));
  app.get('/api/whoami', (c) => c.json({ principal: c.get('keygate') }));
  return app;
}
