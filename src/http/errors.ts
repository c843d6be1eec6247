// The one HTTP error type, the JSON body every error leaves with, and the status of each kind of
// domain error (core/errors.ts): the only place the rules' failures meet HTTP.
import type { DomainError, FailureKind } from '../core/errors';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

export const ERROR_HEADERS = {
  'content-type': 'application/json',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
} as const;

export function errorResponse(
  status: number,
  message: string,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify({ result: 'error', error: message }), {
    status,
    headers: { ...ERROR_HEADERS, ...headers },
  });
}

const STATUS_OF: Record<FailureKind, number> = {
  'not-found': 404,
  forbidden: 403,
  conflict: 409,
  unavailable: 503,
  // Nobody reads this answer (the connection is gone); its status tells the log what happened.
  gone: 499,
};

/** A domain error as its answer: the rule's own sentence, but for the database's (said plainly). */
export function domainErrorResponse(error: DomainError): Response {
  if (error.kind === 'unavailable') {
    return errorResponse(503, 'The database is unavailable right now; try again shortly.', {
      'retry-after': '1',
    });
  }
  return errorResponse(STATUS_OF[error.kind], error.message);
}
