import { type KeygateExpressOptions, keygate } from '@keygate/client/express';
import express from 'express';

export function createApp(options: KeygateExpressOptions) {
  const app = express();
  app.use('/api', keygate(options));
  app.get('/api/whoami', (req, res) => {
    res.json({ principal: req.keygate });
  });
  return app;
}
