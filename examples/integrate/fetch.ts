import { type KeygateFetchOptions, withKeygate } from '@keygate/client/fetch';

export function createHandler(options: KeygateFetchOptions) {
  return withKeygate(options, (_request, principal) => Response.json({ principal }));
}
