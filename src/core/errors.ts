// The errors the rules raise, in the rules' own words: each says what went wrong and which kind of
// failure it is, never an HTTP status. The one mapping at the edge (http/errors.ts) gives each kind
// its status, so no feature below the routes knows HTTP.

/** What kind of failure: the edge answers 404, 403, 409, 503 and 499 (connection gone) for them. */
export type FailureKind = 'not-found' | 'forbidden' | 'conflict' | 'unavailable' | 'gone';

export abstract class DomainError extends Error {
  abstract readonly kind: FailureKind;
}

/**
 * A write not committed because its request's connection had already closed: nobody could receive
 * the answer (a created key's secret, say), so nothing is changed.
 */
export class RequestGoneError extends DomainError {
  override name = 'RequestGoneError';
  readonly kind = 'gone';
  constructor() {
    super('The connection closed before the change was committed, so nothing was changed.');
  }
}
