// Express: app.use('/api', keygate({ url })); the principal is req.keygate. The client's address is
// req.ip, which follows the app's `trust proxy` setting.
import type { Request, RequestHandler } from 'express';
import type { Principal } from './decision';
import { createGuard, type KeygateOptions } from './guard';

export type { Principal } from './decision';
export type KeygateExpressOptions = KeygateOptions<Request>;

declare global {
  namespace Express {
    interface Request {
      keygate?: Principal | null;
    }
  }
}

export function keygate(options: KeygateExpressOptions): RequestHandler {
  const guard = createGuard(options);
  return (req, res, next) => {
    guard({ request: req, header: (name) => req.get(name), address: () => req.ip }).then((decision) => {
      res.set(decision.headers);
      if (!decision.pass) {
        res.status(decision.status).send(decision.body);
        return;
      }
      req.keygate = decision.principal;
      next();
    }, next);
  };
}
