// The WebhookStore interface: endpoints, the outbox's messages and their attempts, rows in, rows out,
// no rules. The implementations are src/db/sqlite/webhooks.ts and src/db/postgres/webhooks.ts. The
// messages themselves are inserted by the key and policy stores, in the transaction of each change.
import type { ApiKeyRow } from '../apikeys/store';
import type { EventType } from './event-names';
import type { OutboxMessage } from './events';

export type StoredEndpoint = {
  id: string;
  url: string;
  /** Event names, or ['*']. */
  events: readonly string[];
  description: string | null;
  enabled: boolean;
  /** `whsec_…`: kept, not hashed, so that the sender can sign (docs/security.md). */
  secret: string;
  previousSecret: string | null;
  previousSecretUntil: number | null;
  createdAt: number;
  failingSince: number | null;
};

export type EndpointChange = Partial<Pick<StoredEndpoint, 'url' | 'events' | 'description' | 'enabled'>>;

export type MessageStatus = 'pending' | 'delivered' | 'failed';

export type StoredAttempt = { at: number; status: number | null; error: string | null };

export type StoredMessage = {
  id: string;
  endpointId: string;
  type: EventType;
  createdAt: number;
  status: MessageStatus;
  attempts: StoredAttempt[];
};

/** A message a sender claimed, with what it needs to send it; `endpoint` undefined once deleted. */
export type ClaimedMessage = {
  id: string;
  type: EventType;
  body: string;
  createdAt: number;
  attempts: number;
  endpoint: StoredEndpoint | undefined;
};

/** What one attempt came to: delivered, to be tried again at `retryAt`, or given up. */
export type AttemptOutcome = { kind: 'delivered' } | { kind: 'retry'; retryAt: number } | { kind: 'failed' };

/** One attempt to record (WebhookStore.recordAttempts). */
export type AttemptRecord = {
  messageId: string;
  /** Set when the endpoint's failing time changes: set on a failure, cleared on a delivery. */
  endpointId: string | undefined;
  attempt: number;
  at: number;
  result: StoredAttempt;
  outcome: AttemptOutcome;
};

export type WebhookChangedListener = () => void;

export interface WebhookStore {
  insertEndpoint(endpoint: StoredEndpoint): Promise<void>;
  listEndpoints(): Promise<StoredEndpoint[]>;
  findEndpoint(id: string): Promise<StoredEndpoint | undefined>;
  /** Resolves with the endpoint as changed, or undefined when there is none. */
  updateEndpoint(id: string, change: EndpointChange): Promise<StoredEndpoint | undefined>;
  /** The new secret; the old one signs too until `previousUntil`. */
  rotateSecret(id: string, secret: string, previousUntil: number): Promise<boolean>;
  /** Removes the endpoint and its messages; true when there was one. */
  deleteEndpoint(id: string): Promise<boolean>;
  /** Turns the endpoint off (410, three days of failures). */
  disableEndpoint(id: string): Promise<void>;

  /** The endpoint's latest messages, latest first, with their attempts. */
  listMessages(endpointId: string, limit: number): Promise<StoredMessage[]>;
  /** Makes the message pending and due at `now`; false when the endpoint has no such message. */
  retryMessage(endpointId: string, messageId: string, now: number): Promise<boolean>;

  /**
   * Up to `limit` messages due at `now` (pending, their next attempt at or before it), each moved to
   * `now + leaseMs` in the same statement, so no other sender takes it while this one tries (on
   * PostgreSQL: FOR UPDATE SKIP LOCKED).
   */
  claimDue(now: number, leaseMs: number, limit: number): Promise<ClaimedMessage[]>;
  /**
   * In one transaction, each record: attempt number `attempt` of its message and its outcome; with
   * an `endpointId`, that endpoint's failing time set (a failure) or cleared (a delivery). A record is
   * ignored when another sender recorded that attempt first (its lease had passed).
   */
  recordAttempts(records: readonly AttemptRecord[]): Promise<void>;
  /** Removes a message whose endpoint is gone. */
  dropMessage(messageId: string): Promise<void>;
  /** Settled messages (delivered or failed) older than `before`, and marks older than it, up to `limit`. */
  deleteSettledBefore(before: number, limit: number): Promise<number>;
  /** Pending messages, and the creation time of the oldest. */
  queueStats(): Promise<{ depth: number; oldestCreatedAt: number | undefined }>;

  /**
   * In one transaction: inserts `mark` unless present (or, with `minGapMs`, unless set less than
   * that long before `at`), and the messages only when it did. Resolves true when they were written.
   */
  writeOnce(
    mark: string,
    at: number,
    minGapMs: number | undefined,
    messages: readonly OutboxMessage[],
  ): Promise<boolean>;
  /**
   * Live keys expiring within `leadMs` of `now` that were created before that window opened and have
   * no mark `markPrefix + id` yet; at most `limit`.
   */
  keysEnteringWindow(now: number, leadMs: number, markPrefix: string, limit: number): Promise<ApiKeyRow[]>;

  /** Runs after each committed change to endpoints, here or (PostgreSQL) on another replica. */
  onEndpointsChanged(listener: WebhookChangedListener): () => void;
  /** Stops listening (PostgreSQL). */
  close(): Promise<void>;
}
