import { type KeygateHonoOptions, keygate } from '@keygate/client/hono';
import { Hono } from 'hono';

export function createApp(options: KeygateHonoOptions) {
  const app = new Hono();
  app.use('/api/*', keygate(options));
  app.get('/api/whoami', (c) => c.json({ principal: c.get('keygate') }));
  return app;
}

// Serve it: export default createApp({ url: 'http://127.0.0.1:3000', minLevel: 1 });
