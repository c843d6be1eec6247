// Values that are ready at once on the hot path (a key cache hit, a synchronous SQLite read) and
// come later otherwise. Handing them on without a promise when they are ready saves a microtask and
// an allocation per verification; this is the one place that tells the two apart.
export type SyncOrAsync<T> = T | Promise<T>;

/** `next(value)` at once when `value` is ready, else once its promise resolves. */
export function andThen<T, U>(value: SyncOrAsync<T>, next: (ready: T) => SyncOrAsync<U>): SyncOrAsync<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}
