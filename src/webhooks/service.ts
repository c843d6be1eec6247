// The rules of webhook endpoints: what an endpoint's body may say, its secret (shown once),
// its rotation with a 24-hour overlap, and its messages. Knows no HTTP and no SQL: it raises domain
// errors, and every change to endpoints reaches the outbox's subscriptions through the store's event.
import type { Clock } from '../core/clock';
import { DomainError } from '../core/errors';
import { endpointUrlProblem } from './destination';
import { ALL_EVENTS, EVENT_TYPES, isEventType } from './event-names';
import type { EndpointChange, StoredEndpoint, StoredMessage, WebhookStore } from './store';

/** How long the replaced secret still signs after a rotation. */
export const SECRET_OVERLAP_MS = 24 * 3600 * 1000;
/** The messages list shows the latest this many. */
export const MESSAGES_LISTED = 100;
const DESCRIPTION_MAX = 500;

export class EndpointNotFoundError extends DomainError {
  override name = 'EndpointNotFoundError';
  readonly kind = 'not-found';
  constructor(what = 'No such webhook endpoint.') {
    super(what);
  }
}

/** A body the rules refuse (400), in one sentence. */
export class EndpointBodyError extends Error {
  override name = 'EndpointBodyError';
}

/** E: an endpoint as the routes show it, never its secret. */
export type EndpointView = {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  createdAt: string;
};

export type MessageView = {
  id: string;
  type: string;
  createdAt: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: Array<{ at: string; status: number | null; error: string | null }>;
};

export type WebhookService = ReturnType<typeof createWebhookService>;

const iso = (ms: number) => new Date(ms).toISOString();

export const endpointView = (endpoint: StoredEndpoint): EndpointView => ({
  id: endpoint.id,
  url: endpoint.url,
  events: [...endpoint.events],
  description: endpoint.description,
  enabled: endpoint.enabled,
  createdAt: iso(endpoint.createdAt),
});

const messageView = (message: StoredMessage): MessageView => ({
  id: message.id,
  type: message.type,
  createdAt: iso(message.createdAt),
  status: message.status,
  attempts: message.attempts.map((attempt) => ({
    at: iso(attempt.at),
    status: attempt.status,
    error: attempt.error,
  })),
});

/** `whsec_` and the base64 of 32 random bytes. */
export function newEndpointSecret(): string {
  return `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64')}`;
}

const newEndpointId = () =>
  `whe_${Buffer.from(crypto.getRandomValues(new Uint8Array(12))).toString('base64url')}`;

/** Why `events` is refused, or undefined: a non-empty list of distinct event names, or ["*"]. */
export function eventsProblem(events: unknown): string | undefined {
  if (!Array.isArray(events) || events.length === 0) {
    return `events must be a non-empty array of event names (${EVENT_TYPES.join(', ')}) or ["*"].`;
  }
  if (events.includes(ALL_EVENTS))
    return events.length === 1 ? undefined : 'events may be ["*"] alone, or a list of names.';
  for (const name of events) {
    if (typeof name !== 'string' || !isEventType(name)) {
      return `Unknown event "${String(name).slice(0, 40)}": the events are ${EVENT_TYPES.join(', ')}, or "*".`;
    }
  }
  if (new Set(events).size !== events.length) return 'events must not name an event twice.';
  return undefined;
}

function descriptionProblem(value: unknown, nullable: boolean): string | undefined {
  if (value === null && nullable) return undefined;
  if (typeof value !== 'string' || value.length > DESCRIPTION_MAX) {
    return `description must be a string of at most ${DESCRIPTION_MAX} characters${nullable ? ', or null' : ''}.`;
  }
  return undefined;
}

const known = (body: Record<string, unknown>, allowed: readonly string[]) => {
  const extra = Object.keys(body).find((name) => !allowed.includes(name));
  return extra === undefined
    ? undefined
    : `Unknown property "${extra.slice(0, 40)}": only ${allowed.join(', ')}.`;
};

/** The create body's problem, or undefined. */
export function createBodyProblem(body: unknown, allowPrivate: boolean): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return 'The body must be a JSON object: {"url","events","description"?}.';
  }
  const fields = body as Record<string, unknown>;
  return (
    known(fields, ['url', 'events', 'description']) ??
    endpointUrlProblem(fields.url, allowPrivate) ??
    eventsProblem(fields.events) ??
    (fields.description === undefined ? undefined : descriptionProblem(fields.description, false))
  );
}

/** The update body's problem, or undefined. */
export function updateBodyProblem(body: unknown, allowPrivate: boolean): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return 'The body must be a JSON object with any of url, events, description, enabled.';
  }
  const fields = body as Record<string, unknown>;
  return (
    known(fields, ['url', 'events', 'description', 'enabled']) ??
    (fields.url === undefined ? undefined : endpointUrlProblem(fields.url, allowPrivate)) ??
    (fields.events === undefined ? undefined : eventsProblem(fields.events)) ??
    (fields.description === undefined ? undefined : descriptionProblem(fields.description, true)) ??
    (fields.enabled === undefined || typeof fields.enabled === 'boolean'
      ? undefined
      : 'enabled must be true or false.')
  );
}

export function createWebhookService({
  store,
  clock,
  onMessagesDue,
  subscriptionsChanged = async () => undefined,
}: {
  store: WebhookStore;
  clock: Clock;
  /** A message was made due now (a retry): the sender looks at once. */
  onMessagesDue?: () => void;
  /**
   * Reads the subscriptions again; awaited before a change to endpoints answers, so this replica's
   * next write already knows it (other replicas learn of it from the store's notification).
   */
  subscriptionsChanged?: () => Promise<void>;
}) {
  const existing = async (id: string) => {
    const endpoint = await store.findEndpoint(id);
    if (endpoint === undefined) throw new EndpointNotFoundError();
    return endpoint;
  };
  return {
    async create(input: { url: string; events: string[]; description?: string }) {
      const endpoint: StoredEndpoint = {
        id: newEndpointId(),
        url: input.url,
        events: input.events,
        description: input.description ?? null,
        enabled: true,
        secret: newEndpointSecret(),
        previousSecret: null,
        previousSecretUntil: null,
        createdAt: clock(),
        failingSince: null,
      };
      await store.insertEndpoint(endpoint);
      await subscriptionsChanged();
      return { endpoint: endpointView(endpoint), secret: endpoint.secret };
    },

    async list() {
      return (await store.listEndpoints()).map(endpointView);
    },

    async get(id: string) {
      return endpointView(await existing(id));
    },

    async update(id: string, change: EndpointChange) {
      const updated = await store.updateEndpoint(id, change);
      if (updated === undefined) throw new EndpointNotFoundError();
      await subscriptionsChanged();
      return endpointView(updated);
    },

    async remove(id: string) {
      if (!(await store.deleteEndpoint(id))) throw new EndpointNotFoundError();
      await subscriptionsChanged();
    },

    /** A new secret; the old one keeps signing for SECRET_OVERLAP_MS. */
    async rotateSecret(id: string) {
      const secret = newEndpointSecret();
      if (!(await store.rotateSecret(id, secret, clock() + SECRET_OVERLAP_MS)))
        throw new EndpointNotFoundError();
      return secret;
    },

    async messages(id: string) {
      await existing(id);
      return (await store.listMessages(id, MESSAGES_LISTED)).map(messageView);
    },

    async retry(id: string, messageId: string) {
      await existing(id);
      if (!(await store.retryMessage(id, messageId, clock()))) {
        throw new EndpointNotFoundError('The endpoint has no such message.');
      }
      onMessagesDue?.();
    },
  };
}
