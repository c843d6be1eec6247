// The webhook events, the outbox's message, and how one is built: a Standard Webhooks body
// `{"type","timestamp","data"}` for each endpoint subscribed to its type. Knows no SQL and no HTTP.
import type { EventType } from './event-names';

/** One row of the outbox: an event for one endpoint, its webhook-id and its signed body. */
export type OutboxMessage = {
  id: string;
  endpointId: string;
  type: EventType;
  body: string;
  createdAt: number;
};

/**
 * What a store's write runs inside its transaction, given what the write did (the row inserted or
 * updated, the rows deleted): the messages to insert with it. The services build it; the stores only
 * insert what it answers.
 */
export type OutboxHook<T> = (outcome: T) => readonly OutboxMessage[];

/**
 * A webhook-id: `msg_`, the time in 12 hex digits and 128 random bits, unique per message and
 * endpoint. Time first, so that the outbox's inserts append to its primary-key index instead of
 * landing on a random page each (fewer pages for each commit to write).
 */
export function newMessageId(at: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `msg_${Math.max(0, Math.floor(at)).toString(16).padStart(12, '0')}${Buffer.from(bytes).toString('base64url')}`;
}

/** The message body: `data` never holds a secret, a hash or a token (the callers give key info). */
export function messageBody(type: EventType, at: number, data: Record<string, unknown>): string {
  return JSON.stringify({ type, timestamp: new Date(at).toISOString(), data });
}
