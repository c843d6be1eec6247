// The console's one way to keygate: JSON requests to the console's API (relative URLs, so any
// BASE_PATH works), the session's CSRF token on every change, and keygate's own sentence as the
// error a screen shows.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

let csrfToken = '';

export function setCsrfToken(token: string): void {
  csrfToken = token;
}

export async function call<T>(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  const sent: Record<string, string> = { ...headers };
  if (body !== undefined) sent['content-type'] = 'application/json';
  if (method !== 'GET') sent['x-keygate-csrf'] = csrfToken;
  let response: Response;
  try {
    response = await fetch(`console/api/${path}`, {
      method,
      headers: sent,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch {
    throw new ApiError(0, 'keygate cannot be reached; check the connection and try again.');
  }
  if (response.status === 204) return undefined as T;
  let json: { error?: string } | undefined;
  try {
    json = await response.json();
  } catch {
    json = undefined;
  }
  if (!response.ok) {
    throw new ApiError(response.status, json?.error ?? `keygate answered ${response.status}.`);
  }
  return json as T;
}

export type Rules = {
  maxLevel: number;
  permissions: string[] | null;
  maxExpiresInSeconds: number;
  userIds: 'numeric' | 'mapped';
};

export type Me = {
  session: {
    kind: 'user' | 'operator';
    userId: number | null;
    level: number;
    by: string;
    expiresAt: string;
    csrfToken: string;
  };
  rules: Rules;
};

export type Key = {
  key: string;
  name: string;
  level: number;
  userId: number;
  createdAt: string;
  expiresAt: string;
  enabled: boolean;
  lastUsedAt: string | null;
  retiring?: true;
  meta?: Record<string, unknown>;
  permissions?: string[];
  ratelimit?: { limit: number; duration: number };
  credits?: { remaining: number; refill?: { amount: number; interval: number } };
};

export type CreatedKey = Key & { secret: string };

export type Bucket = {
  start: string;
  valid: number;
  rateLimited: number;
  usageExceeded: number;
  denied: number;
};

/** Where a key screen's routes are: the user's own, or the operator's acting for a user. */
export type KeyRoutes = {
  /** `apikeys/…/session` under this base. */
  base: string;
  headers: Record<string, string>;
};

export const OWN_KEYS: KeyRoutes = { base: '', headers: {} };

export function actingFor(userId: number): KeyRoutes {
  return { base: 'operator/', headers: { 'x-keygate-acting-for': String(userId) } };
}
