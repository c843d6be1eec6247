// Which request a piece of work belongs to, without passing it through every layer: the HTTP edge
// runs each request inside this scope, and the group-commit writer asks whether the client that
// queued a write is still connected before it commits the write.
import { AsyncLocalStorage } from 'node:async_hooks';

const scope = new AsyncLocalStorage<AbortSignal>();

/** Runs `work` as part of the request whose connection `signal` reports on. */
export function runForRequest<T>(signal: AbortSignal, work: () => T): T {
  return scope.run(signal, work);
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
