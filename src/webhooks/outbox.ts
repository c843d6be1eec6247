// The outbox's front: which endpoints each event type goes to (held in memory, read again whenever
// endpoints change, here or on another replica, and every minute in case a notification was lost), and
// the hooks the services give the stores' writes. When no endpoint subscribes to a type, the services
// get no hook and the write path does nothing more than before.
import type { Clock } from '../core/clock';
import type { Logger } from '../core/log';
import { ALL_EVENTS, type EventType } from './event-names';
import { messageBody, newMessageId, type OutboxHook, type OutboxMessage } from './events';
import type { StoredEndpoint, WebhookStore } from './store';

/** How often the subscriptions are read again even without a change event (a lost NOTIFY). */
export const SUBSCRIPTIONS_REFRESH_MS = 60_000;

export type Outbox = ReturnType<typeof createOutbox>;

export function createOutbox({
  store,
  clock,
  logger,
}: {
  store: Pick<WebhookStore, 'listEndpoints' | 'onEndpointsChanged'>;
  clock: Clock;
  logger?: Pick<Logger, 'warn'>;
}) {
  let byType = new Map<EventType, readonly string[]>();
  let all: readonly string[] = [];
  const wakers = new Set<() => void>();

  const apply = (endpoints: readonly StoredEndpoint[]) => {
    const next = new Map<EventType, string[]>();
    const wildcard: string[] = [];
    for (const endpoint of endpoints) {
      if (!endpoint.enabled) continue;
      if (endpoint.events.includes(ALL_EVENTS)) wildcard.push(endpoint.id);
      else {
        for (const type of endpoint.events as EventType[])
          next.set(type, [...(next.get(type) ?? []), endpoint.id]);
      }
    }
    all = wildcard;
    byType = next;
  };
  let reading: Promise<void> | undefined;
  let again = false;
  /** Reads the endpoints again; a change during a read reads once more after it. */
  const refresh = (): Promise<void> => {
    if (reading) {
      again = true;
      return reading;
    }
    reading = store
      .listEndpoints()
      .then(apply)
      .catch((error: unknown) => logger?.warn('webhook endpoints not read', { reason: String(error) }))
      .finally(() => {
        reading = undefined;
        if (again) {
          again = false;
          void refresh();
        }
      });
    return reading;
  };
  store.onEndpointsChanged(() => void refresh());

  const endpointsFor = (type: EventType): readonly string[] => {
    const own = byType.get(type);
    return own === undefined ? all : all.length === 0 ? own : [...own, ...all];
  };

  const messagesOf = (type: EventType, data: Record<string, unknown>, at: number): OutboxMessage[] => {
    const endpoints = endpointsFor(type);
    if (endpoints.length === 0) return [];
    const body = messageBody(type, at, data);
    return endpoints.map((endpointId) => ({ id: newMessageId(at), endpointId, type, body, createdAt: at }));
  };

  return {
    /** Reads the subscriptions; resolves once they are known. */
    refresh,
    /** Whether any enabled endpoint takes `type`. */
    wants: (type: EventType) => endpointsFor(type).length > 0,
    /** The messages of one event, one per subscribed endpoint (none when nobody subscribes). */
    messages: (type: EventType, data: Record<string, unknown>, at = clock()) => messagesOf(type, data, at),
    /**
     * The hook for a write whose event data depends on what it did; undefined when nobody takes
     * `type`, so the write costs nothing more. `data` may answer undefined: no event for that outcome.
     */
    hook<T>(
      type: EventType,
      data: (outcome: T) => Record<string, unknown> | undefined,
    ): OutboxHook<T> | undefined {
      if (endpointsFor(type).length === 0) return undefined;
      return (outcome) => {
        const fields = data(outcome);
        return fields === undefined ? [] : messagesOf(type, fields, clock());
      };
    },
    /** As `hook`, for a write that causes one event of `type` per item (a purge's keys). */
    hookEach<T>(
      type: EventType,
      events: (outcome: T) => ReadonlyArray<Record<string, unknown>>,
    ): OutboxHook<T> | undefined {
      if (endpointsFor(type).length === 0) return undefined;
      return (outcome) => events(outcome).flatMap((fields) => messagesOf(type, fields, clock()));
    },
    /** Hooks of several writes' events run one after the other (undefined when none is given). */
    both<T>(...hooks: Array<OutboxHook<T> | undefined>): OutboxHook<T> | undefined {
      const given = hooks.filter((hook) => hook !== undefined);
      if (given.length === 0) return undefined;
      return (outcome) => given.flatMap((hook) => hook(outcome));
    },
    /** Told after a write with messages committed: the sender looks for them at once. */
    committed(): void {
      for (const wake of wakers) wake();
    },
    onCommitted(wake: () => void): () => void {
      wakers.add(wake);
      return () => wakers.delete(wake);
    },
  };
}
