// What the console's sessions need from a database: one-time codes and sessions by the SHA-256 of
// their token (never the token), in the database so that every replica knows them. Rows in, rows out.

/** Whom a code or a session lets in: a user (at a level), or the operator (`userId` null). */
export type SessionGrant = {
  userId: number | null;
  level: number;
  /** Who started it, for audit lines: `jwt:<sub>`, `admin:<sub>` or `cli:console-link`. */
  by: string;
  /** How long the session a code opens lasts. */
  sessionSeconds: number;
};

export type StoredSession = SessionGrant & { expiresAt: number };

export interface SessionStore {
  /** Stores a one-time code; expired codes and sessions are removed in the same write. */
  insertCode(codeHash: string, grant: SessionGrant, expiresAt: number, now: number): Promise<void>;
  /**
   * Takes the code (it is gone afterwards, used or expired) and, when it was unexpired, stores the
   * session it opens, in one transaction: two exchanges of one code never both get a session.
   */
  exchangeCode(codeHash: string, sessionHash: string, now: number): Promise<StoredSession | undefined>;
  /** The unexpired session of that hash. */
  findSession(sessionHash: string, now: number): Promise<StoredSession | undefined>;
  deleteSession(sessionHash: string): Promise<void>;
  /** Ends every code and session of the user (revoke-all); resolves with how many there were. */
  deleteSessionsOfUser(userId: number): Promise<number>;
}
