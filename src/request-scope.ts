// Which request a write belongs to, without passing it through every layer: a route that changes
// keys runs its service call inside this scope, and the writer (group commit, or the PostgreSQL
// transaction) asks whether the client that asked for the write is still connected before it commits.
// Only writes pay for it: reading `request.signal` and entering the scope cost ~2 µs a request.
import { AsyncLocalStorage } from 'node:async_hooks';

const scope = new AsyncLocalStorage<AbortSignal>();

/** Runs `work` (a change to keys) on behalf of `request`, whose connection its signal reports on. */
export function whileConnected<T>(request: Request, work: () => T): T {
  return scope.run(request.signal, work);
}

/** The signal of the request the caller works for, if any (undefined for timers, the CLI, tests). */
export function currentRequestSignal(): AbortSignal | undefined {
  return scope.getStore();
}

/**
 * A write not committed because its request's connection had already closed: nobody could receive
 * the answer (a created key's secret, say), so nothing is changed.
 */
export class RequestGoneError extends Error {
  constructor() {
    super('The connection closed before the change was committed, so nothing was changed.');
    this.name = 'RequestGoneError';
  }
}
