// The webhook event names (§24) and "*" for all of them: one list for the server, which refuses any
// other name, and the operator's console, whose form offers these. Imports nothing, so the console's
// bundle takes it as it is.

export const EVENT_TYPES = [
  'key.created',
  'key.updated',
  'key.rotated',
  'key.deleted',
  'key.expiring',
  'key.credits_low',
  'key.credits_exhausted',
  'key.rate_limited',
  'key.leaked',
  'user.policy_updated',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** What an endpoint subscribes to for every event. */
export const ALL_EVENTS = '*';

export const isEventType = (name: string): name is EventType =>
  (EVENT_TYPES as readonly string[]).includes(name);
