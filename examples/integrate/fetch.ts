import { type KeygateFetchOptions, withKeygate } from '@keygate/client/fetch';

export function createHandler(options: KeygateFetchOptions) {
  return withKeygate(options, (_request, principal) => Response.json({ principal }));
}

// Serve it: Bun.serve({ port: 8080, fetch: createHandler({ url: 'http://127.0.0.1:3000', minLevel: 1 }) });
