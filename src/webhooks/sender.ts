// Delivery: claims due messages from the outbox (on PostgreSQL with SKIP LOCKED and a lease, so
// each message goes out once per deployment), signs them by Standard Webhooks 1.0 and POSTs them;
// 2xx is delivered, anything else (a redirect, no answer within the timeout) is retried on the
// schedule below for three days, honouring Retry-After on 429 and 503; 410 disables the endpoint at
// once, and so do three days of failures. The clock and the timer are injected: tests move time.
import { createHmac } from 'node:crypto';
import type { Clock } from '../core/clock';
import type { Logger } from '../core/log';
import { type FlushTimer, intervalTimer } from '../usage/flusher';
import { type Resolver, sendingProblem, systemResolver } from './destination';
import type { AttemptOutcome, AttemptRecord, ClaimedMessage, StoredEndpoint, WebhookStore } from './store';

type Attempted = {
  record: AttemptRecord;
  type: string;
  endpoint: StoredEndpoint;
  disableFor: 'gone' | 'failing' | undefined;
};

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
/** After the nth failed attempt, the next one comes this much later; after the last, every 12 hours. */
export const RETRY_DELAYS_MS = [5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR];
export const LATER_RETRY_MS = 12 * HOUR;
/** How long a message (and an endpoint) keeps failing before it is given up (disabled). */
export const GIVE_UP_AFTER_MS = 3 * 24 * HOUR;
export const SEND_TIMEOUT_MS = 10 * SECOND;
/** A claimed message is left to the others if not settled by then: well above the send timeout. */
export const LEASE_MS = 30 * SECOND;
/** Messages claimed at once; they are sent concurrently. */
export const CLAIM_BATCH = 64;
/** How long a wake waits for more commits to join its pass. */
export const WAKE_DELAY_MS = 20;
/** How often a sender looks for due messages when not woken (messages of other replicas, retries). */
export const POLL_MS = 1000;

/** What the sender tells the metrics. */
export type SenderObserver = {
  message(event: string, outcome: 'delivered' | 'retry' | 'failed' | 'dropped'): void;
  endpointDisabled(reason: 'gone' | 'failing'): void;
};

export type SenderOptions = {
  store: WebhookStore;
  clock: Clock;
  /** The webhook-timestamp's clock: real time, as the receivers' libraries check it against theirs. */
  signingClock?: Clock;
  allowPrivate: boolean;
  resolve?: Resolver;
  fetch?: typeof fetch;
  logger: Logger;
  observer?: SenderObserver;
  timeoutMs?: number;
  /** What runs the poll every POLL_MS (tests drive it by hand). */
  timer?: FlushTimer;
  /** Also run on each poll (the derived events' scan), at most once at a time. */
  onPoll?: () => Promise<unknown>;
};

export type Sender = ReturnType<typeof createSender>;

/** `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` with a `whsec_` secret. */
export function signatureOf(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** The webhook-signature header: the current secret's, and the previous one's during its overlap. */
export function signatureHeader(
  endpoint: StoredEndpoint,
  id: string,
  timestamp: number,
  body: string,
  now: number,
) {
  const signatures = [signatureOf(endpoint.secret, id, timestamp, body)];
  if (endpoint.previousSecret && (endpoint.previousSecretUntil ?? 0) > now) {
    signatures.push(signatureOf(endpoint.previousSecret, id, timestamp, body));
  }
  return signatures.join(' ');
}

/** Retry-After as ms from now (seconds or an HTTP date), or undefined. */
export function retryAfterMs(value: string | null, now: number): number | undefined {
  if (value === null) return undefined;
  if (/^[0-9]+$/.test(value.trim())) return Number(value.trim()) * SECOND;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export function createSender({
  store,
  clock,
  signingClock = () => Date.now(),
  allowPrivate,
  resolve = systemResolver,
  fetch: send = fetch,
  logger,
  observer,
  timeoutMs = SEND_TIMEOUT_MS,
  timer = intervalTimer,
  onPoll,
}: SenderOptions) {
  let running: Promise<number> | undefined;
  let next: Promise<number> | undefined;
  let wakeTimer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  let stopTimer: (() => void) | undefined;
  let polling: Promise<unknown> | undefined;

  /** One POST: its HTTP status, or why there was none. */
  async function post(endpoint: StoredEndpoint, message: ClaimedMessage) {
    const problem = await sendingProblem(endpoint.url, allowPrivate, resolve);
    if (problem !== undefined) return { status: null, error: `Not sent: ${problem}.`, retryAfter: undefined };
    const timestamp = Math.floor(signingClock() / 1000);
    const abort = new AbortController();
    const timeout = setTimeout(() => abort.abort(), timeoutMs);
    try {
      const response = await send(endpoint.url, {
        method: 'POST',
        redirect: 'manual',
        signal: abort.signal,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'keygate-webhooks',
          'webhook-id': message.id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(endpoint, message.id, timestamp, message.body, clock()),
        },
        body: message.body,
      });
      await response.body?.cancel().catch(() => undefined);
      const { status } = response;
      const ok = status >= 200 && status < 300;
      return {
        status,
        error: ok ? null : status >= 300 && status < 400 ? 'A redirect, which is not followed.' : null,
        retryAfter:
          status === 429 || status === 503
            ? retryAfterMs(response.headers.get('retry-after'), clock())
            : undefined,
      };
    } catch (error) {
      const reason = abort.signal.aborted
        ? `No answer within ${timeoutMs / 1000} s.`
        : `The request failed (${(error as { code?: string }).code ?? (error as Error).message}).`;
      return { status: null, error: reason, retryAfter: undefined };
    } finally {
      clearTimeout(timeout);
    }
  }

  async function disable(endpoint: StoredEndpoint, reason: 'gone' | 'failing') {
    await store.disableEndpoint(endpoint.id);
    logger.info('webhook.endpoint_disabled', {
      endpoint: endpoint.id,
      reason: reason === 'gone' ? 'it answered 410 Gone' : 'three days of failed deliveries',
    });
    observer?.endpointDisabled(reason);
  }

  /** One attempt at a message: what to record, and what it means for its endpoint. */
  async function attemptOf(message: ClaimedMessage): Promise<Attempted | undefined> {
    const { endpoint } = message;
    if (endpoint === undefined) {
      // Its endpoint was deleted after the message was written: nobody to send it to.
      await store.dropMessage(message.id);
      observer?.message(message.type, 'dropped');
      return undefined;
    }
    const attempt = message.attempts + 1;
    const result = endpoint.enabled
      ? await post(endpoint, message)
      : { status: null, error: 'Not sent: the endpoint is disabled.', retryAfter: undefined };
    const now = clock();
    const delivered = result.status !== null && result.status >= 200 && result.status < 300;
    let outcome: AttemptOutcome;
    let givenUp = false;
    if (delivered) outcome = { kind: 'delivered' };
    else if (result.status === 410 || !endpoint.enabled) outcome = { kind: 'failed' };
    else {
      const delay = result.retryAfter ?? RETRY_DELAYS_MS[attempt - 1] ?? LATER_RETRY_MS;
      const retryAt = now + Math.min(Math.max(delay, SECOND), LATER_RETRY_MS);
      givenUp = retryAt > message.createdAt + GIVE_UP_AFTER_MS;
      outcome = givenUp ? { kind: 'failed' } : { kind: 'retry', retryAt };
    }
    // The endpoint's failing time changes only when its state does: most deliveries write no endpoint row.
    const failingChanges = delivered ? endpoint.failingSince !== null : endpoint.failingSince === null;
    const record: AttemptRecord = {
      messageId: message.id,
      endpointId: endpoint.enabled && failingChanges ? endpoint.id : undefined,
      attempt,
      at: now,
      result: { at: now, status: result.status, error: result.error },
      outcome,
    };
    let disableFor: 'gone' | 'failing' | undefined;
    if (endpoint.enabled && result.status === 410) disableFor = 'gone';
    else if (endpoint.enabled && !delivered) {
      // Three days of failures: this message failed for three days with no delivery since, or the
      // endpoint has failed for three days.
      const failingSince = endpoint.failingSince ?? now;
      if ((givenUp && failingSince <= message.createdAt) || now - failingSince >= GIVE_UP_AFTER_MS) {
        disableFor = 'failing';
      }
    }
    return { record, type: message.type, endpoint, disableFor };
  }

  /** Sends every message due now, batch after batch; resolves with how many were tried. */
  async function deliverDue(): Promise<number> {
    let tried = 0;
    for (;;) {
      const claimed = await store.claimDue(clock(), LEASE_MS, CLAIM_BATCH);
      const attempted = await Promise.all(
        claimed.map((message) =>
          attemptOf(message).catch((error: unknown) => {
            logger.warn('webhook delivery not recorded', { message: message.id, reason: String(error) });
            return undefined;
          }),
        ),
      );
      const done = attempted.filter((item) => item !== undefined);
      // One write for the whole batch's attempts.
      if (done.length > 0) await store.recordAttempts(done.map((item) => item.record));
      const disabled = new Set<string>();
      for (const { type, record, endpoint, disableFor } of done) {
        observer?.message(type, record.outcome.kind);
        if (disableFor !== undefined && !disabled.has(endpoint.id)) {
          disabled.add(endpoint.id);
          await disable(endpoint, disableFor);
        }
      }
      tried += claimed.length;
      if (claimed.length < CLAIM_BATCH) return tried;
    }
  }

  /**
   * One pass; when one is running, one more right after it (a single one however many ask meanwhile),
   * so that what was committed before the call is always looked for.
   */
  function run(): Promise<number> {
    if (running) {
      next ??= running.then(() => {
        next = undefined;
        return run();
      });
      return next;
    }
    running = deliverDue()
      .catch((error: unknown) => {
        logger.warn('webhook delivery pass failed', { reason: String(error) });
        return 0;
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  }

  return {
    /** Delivers what is due now (tests call it after moving the clock). */
    deliverDue: run,
    /**
     * A local commit wrote messages: send them now rather than at the next poll. Wakes within
     * WAKE_DELAY_MS share one pass, so a burst of writes is claimed in full batches.
     */
    wake(): void {
      if (wakeTimer !== undefined || stopped) return;
      wakeTimer = setTimeout(() => {
        wakeTimer = undefined;
        void run();
      }, WAKE_DELAY_MS);
    },
    /** Polls every POLL_MS until stop(). */
    start(): void {
      stopTimer ??= timer(() => {
        void run();
        if (onPoll && !polling) {
          polling = onPoll()
            .catch((error: unknown) => logger.warn('webhook scan failed', { reason: String(error) }))
            .finally(() => {
              polling = undefined;
            });
        }
      }, POLL_MS);
    },
    /** Stops polling and waits for the pass in flight. */
    async stop(): Promise<void> {
      stopped = true;
      stopTimer?.();
      stopTimer = undefined;
      clearTimeout(wakeTimer);
      wakeTimer = undefined;
      await running;
      await next;
      await polling;
    },
  };
}
