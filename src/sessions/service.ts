// The console's sessions: one-time links, their exchange for a session, the session behind a cookie,
// and its CSRF token. Codes and session tokens are 256 random bits; only their SHA-256 is stored
// (store.ts), so a copy of the database opens no console. Knows no HTTP.
import type { Clock } from '../core/clock';
import { DomainError } from '../core/errors';
import type { SessionGrant, SessionStore, StoredSession } from './store';

/** How long a link's code may be exchanged. */
export const CODE_SECONDS = 300;
export const MIN_SESSION_SECONDS = 60;
export const MAX_SESSION_SECONDS = 86_400;

/** A code or session token as this service makes them: 32 random bytes in base64url. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export type SessionService = ReturnType<typeof createSessionService>;

/** A link's code that was used already, has expired, or never was. */
export class CodeRefusedError extends DomainError {
  override name = 'CodeRefusedError';
  readonly kind = 'forbidden';
  constructor() {
    super('This console link was used already or has expired; ask for a new one.');
  }
}

export function createSessionService({
  store,
  clock,
  defaultSessionSeconds,
  consolePath,
}: {
  store: SessionStore;
  clock: Clock;
  defaultSessionSeconds: number;
  /** Where the console is: PUBLIC_URL (when set) + BASE_PATH + /console. */
  consolePath: string;
}) {
  return {
    /** A one-time link for the grant: the code is in the fragment, which browsers never send. */
    async issueLink(
      grant: Omit<SessionGrant, 'sessionSeconds'>,
      sessionSeconds = defaultSessionSeconds,
    ): Promise<{ url: string; expiresAt: string }> {
      const code = randomToken();
      const now = clock();
      const expiresAt = now + CODE_SECONDS * 1000;
      await store.insertCode(hashToken(code), { ...grant, sessionSeconds }, expiresAt, now);
      return { url: `${consolePath}#code=${code}`, expiresAt: new Date(expiresAt).toISOString() };
    },

    /** The session a code opens (the code is spent whatever happens); CodeRefusedError when it cannot. */
    async exchange(code: string): Promise<{ token: string; session: StoredSession }> {
      if (!TOKEN_PATTERN.test(code)) throw new CodeRefusedError();
      const token = randomToken();
      const session = await store.exchangeCode(hashToken(code), hashToken(token), clock());
      if (session === undefined) throw new CodeRefusedError();
      return { token, session };
    },

    /** The live session behind a cookie's token, if any. */
    async sessionOf(token: string): Promise<StoredSession | undefined> {
      if (!TOKEN_PATTERN.test(token)) return undefined;
      return store.findSession(hashToken(token), clock());
    },

    async logout(token: string): Promise<void> {
      if (TOKEN_PATTERN.test(token)) await store.deleteSession(hashToken(token));
    },

    /** Revoke-all: the user's codes and sessions end with its keys. */
    endSessionsOfUser(userId: number): Promise<number> {
      return store.deleteSessionsOfUser(userId);
    },

    /**
     * The session's CSRF token: derived from the session token (a hash the page cannot compute, for
     * the cookie is HttpOnly), so nothing more is stored and every replica derives the same.
     */
    csrfTokenOf(token: string): string {
      return new Bun.CryptoHasher('sha256').update(`keygate csrf\u0000${token}`).digest('base64url');
    },
  };
}

function randomToken(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url');
}

function hashToken(token: string): string {
  return new Bun.CryptoHasher('sha256').update(token).digest('hex');
}
