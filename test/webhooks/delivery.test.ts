// Delivery: 2xx delivered; a failure, a redirect or no answer retried on the schedule, Retry-After
// honoured on 429 and 503; 410 and three days of failures disable the endpoint; the secret's 24-hour
// overlap; private addresses refused after resolution; retention. The clock is moved, never slept on.
import { afterEach, describe, expect, it, setDefaultTimeout } from 'bun:test';
import { Webhook } from 'standardwebhooks';
import { purgeOldWebhookMessages } from '../../src/jobs/purge';
import { systemResolver } from '../../src/webhooks/destination';
import { newMessageId } from '../../src/webhooks/events';
import { testKeygate } from '../support/keygate';
import { createEndpoint, startReceiver, verified, webhookSetup } from './support';

// On PostgreSQL the first test of a run also creates the template database.
setDefaultTimeout(30_000);

let setup: Awaited<ReturnType<typeof webhookSetup>> | undefined;
afterEach(async () => {
  await setup?.close();
  setup = undefined;
});

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

async function messagesOf(s: NonNullable<typeof setup>) {
  const response = await s.kg.req('GET', `/admin/webhooks/${s.endpoint.id}/messages`, {
    headers: await s.kg.operator(),
  });
  return response.json.messages as Array<{
    id: string;
    type: string;
    status: string;
    createdAt: string;
    attempts: Array<{ at: string; status: number | null; error: string | null }>;
  }>;
}

describe('webhook delivery', () => {
  it('retries a failed message on the schedule with the same webhook-id, then delivers it', async () => {
    setup = await webhookSetup(['key.created']);
    const { kg, receiver, deliver } = setup;
    receiver.answer(() => ({ status: 500 }));
    await kg.createKey(1);
    await deliver();
    expect(receiver.received.length).toBe(1);
    let [message] = await messagesOf(setup);
    expect(message).toMatchObject({ type: 'key.created', status: 'pending' });
    expect(message?.attempts).toEqual([
      { at: new Date(kg.time.now).toISOString(), status: 500, error: null },
    ]);
    kg.time.now += 4 * SECOND;
    await deliver();
    expect(receiver.received.length).toBe(1);
    kg.time.now += SECOND;
    await deliver();
    expect(receiver.received.length).toBe(2);
    // The next one 5 minutes later.
    kg.time.now += 4 * MINUTE;
    await deliver();
    expect(receiver.received.length).toBe(2);
    receiver.answer(() => ({ status: 200 }));
    kg.time.now += MINUTE;
    await deliver();
    expect(receiver.received.length).toBe(3);
    const ids = new Set(receiver.received.map((entry) => entry.headers['webhook-id']));
    expect([...ids]).toEqual([message?.id]);
    [message] = await messagesOf(setup);
    expect(message?.status).toBe('delivered');
    expect(message?.attempts.map((attempt) => attempt.status)).toEqual([500, 500, 200]);
    // Delivered: never sent again.
    kg.time.now += 13 * HOUR;
    await deliver();
    expect(receiver.received.length).toBe(3);
  });

  it.each([429, 503])('honours Retry-After on %i', async (status) => {
    setup = await webhookSetup(['key.created']);
    const { kg, receiver, deliver } = setup;
    receiver.answer(() => ({ status, headers: { 'retry-after': '120' } }));
    await kg.createKey(1);
    await deliver();
    kg.time.now += 119 * SECOND;
    await deliver();
    expect(receiver.received.length).toBe(1);
    kg.time.now += SECOND;
    await deliver();
    expect(receiver.received.length).toBe(2);
  });

  it('410 disables the endpoint at once, with an audit line and a metric', async () => {
    setup = await webhookSetup(['key.created'], { METRICS_PORT: '9464' });
    const { kg, receiver, endpoint, deliver } = setup;
    receiver.answer(() => ({ status: 410 }));
    await kg.createKey(1);
    await deliver();
    const got = await kg.req('GET', `/admin/webhooks/${endpoint.id}`, { headers: await kg.operator() });
    expect(got.json.endpoint.enabled).toBe(false);
    expect((await messagesOf(setup))[0]?.status).toBe('failed');
    expect(kg.logLines('webhook.endpoint_disabled')).toEqual([
      expect.objectContaining({ endpoint: endpoint.id, reason: 'it answered 410 Gone' }),
    ]);
    const metrics = await kg.keygate.metrics?.exposition();
    expect(metrics).toContain('keygate_webhook_endpoints_disabled_total{reason="gone"} 1');
    expect(metrics).toContain('keygate_webhook_messages_total{event="key.created",outcome="failed"} 1');
    // Disabled: later events are not written for it.
    await kg.createKey(1);
    kg.time.now += HOUR;
    await deliver();
    expect(receiver.received.length).toBe(1);
    expect((await messagesOf(setup)).length).toBe(1);
  });

  it('no answer within the timeout is a failure, retried', async () => {
    setup = await webhookSetup(['key.created'], {}, { webhookDelivery: { timeoutMs: 200 } });
    const { kg, receiver, deliver } = setup;
    receiver.answer(() => 'hang');
    await kg.createKey(1);
    await deliver();
    const [message] = await messagesOf(setup);
    expect(message?.status).toBe('pending');
    expect(message?.attempts).toEqual([
      expect.objectContaining({ status: null, error: 'No answer within 0.2 s.' }),
    ]);
  });

  it('a redirect is a failure and is not followed', async () => {
    setup = await webhookSetup(['key.created']);
    const { kg, receiver, deliver } = setup;
    receiver.answer(() => ({ status: 302, headers: { location: `${receiver.url}/elsewhere` } }));
    await kg.createKey(1);
    await deliver();
    expect(receiver.received.length).toBe(1);
    const [message] = await messagesOf(setup);
    expect(message?.attempts).toEqual([
      expect.objectContaining({ status: 302, error: 'A redirect, which is not followed.' }),
    ]);
    expect(message?.status).toBe('pending');
  });

  it('gives a message up after three days of failures and disables the endpoint', async () => {
    setup = await webhookSetup(['key.created'], { METRICS_PORT: '9464' });
    const { kg, receiver, endpoint, deliver } = setup;
    receiver.answer(() => ({ status: 500 }));
    const start = kg.time.now;
    await kg.createKey(1);
    await deliver();
    for (let i = 0; i < 20; i++) {
      kg.time.now += HOUR;
      await deliver();
    }
    for (let i = 0; i < 8; i++) {
      kg.time.now += 12 * HOUR;
      await deliver();
    }
    const [message] = await messagesOf(setup);
    expect(message?.status).toBe('failed');
    const times = message?.attempts.map((attempt) => Date.parse(attempt.at) - start) ?? [];
    // 0, ~5 s, ~5 min, ~30 min, ~2 h, ~5 h, ~10 h after the one before (hour steps round them up), then every 12 h.
    const gaps = times.slice(1).map((at, i) => at - (times[i] as number));
    expect(gaps.slice(0, 3).every((gap) => gap <= HOUR)).toBe(true);
    expect(gaps.slice(6).every((gap) => gap === 12 * HOUR)).toBe(true);
    expect(times.at(-1)).toBeLessThanOrEqual(3 * 24 * HOUR);
    const got = await kg.req('GET', `/admin/webhooks/${endpoint.id}`, { headers: await kg.operator() });
    expect(got.json.endpoint.enabled).toBe(false);
    expect(kg.logLines('webhook.endpoint_disabled')).toEqual([
      expect.objectContaining({ endpoint: endpoint.id, reason: 'three days of failed deliveries' }),
    ]);
    expect(await kg.keygate.metrics?.exposition()).toContain(
      'keygate_webhook_endpoints_disabled_total{reason="failing"} 1',
    );
  });

  it('signs with both secrets for 24 hours after a rotation, then with the new one only', async () => {
    setup = await webhookSetup(['key.created']);
    const { kg, receiver, endpoint, deliver } = setup;
    const rotated = await kg.req('POST', `/admin/webhooks/${endpoint.id}/secret`, {
      headers: await kg.operator(),
    });
    const fresh = rotated.json.secret as string;
    await kg.createKey(1);
    await deliver();
    const [during] = receiver.received;
    expect(during?.headers['webhook-signature']?.split(' ')).toHaveLength(2);
    expect(verified(fresh, during as NonNullable<typeof during>)).toBeDefined();
    expect(verified(endpoint.secret, during as NonNullable<typeof during>)).toBeDefined();
    kg.time.now += 24 * HOUR + SECOND;
    await kg.createKey(1);
    await deliver();
    const after = receiver.received[1] as NonNullable<typeof during>;
    expect(after.headers['webhook-signature']?.split(' ')).toHaveLength(1);
    expect(verified(fresh, after)).toBeDefined();
    expect(() => verified(endpoint.secret, after)).toThrow();
  });

  it('sends the headers of Standard Webhooks 1.0', async () => {
    setup = await webhookSetup(['key.created']);
    const { kg, receiver, endpoint, deliver } = setup;
    await kg.createKey(1);
    await deliver();
    const [entry] = receiver.received;
    expect(entry?.headers['content-type']).toBe('application/json');
    expect(entry?.headers['webhook-id']).toMatch(/^msg_/);
    expect(Math.abs(Number(entry?.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    expect(entry?.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    // The library refuses a tampered body.
    expect(() =>
      new Webhook(endpoint.secret).verify(`${entry?.body} `, {
        'webhook-id': entry?.headers['webhook-id'] as string,
        'webhook-timestamp': entry?.headers['webhook-timestamp'] as string,
        'webhook-signature': entry?.headers['webhook-signature'] as string,
      }),
    ).toThrow();
  });

  it('refuses a host that resolves to a private address unless WEBHOOK_ALLOW_PRIVATE=true', async () => {
    const receiver = startReceiver();
    const kg = await testKeygate(
      {},
      {
        webhookDelivery: {
          resolve: async (host) => (host === 'hooks.example.test' ? ['10.0.0.8'] : systemResolver(host)),
        },
      },
    );
    try {
      // A name is taken at creation; its addresses are checked when sending.
      const named = await createEndpoint(kg, 'https://hooks.example.test/x', ['key.created']);
      const local = await createEndpoint(kg, 'https://localhost:1/x', ['key.created']);
      await kg.createKey(1);
      await kg.keygate.webhooks.sender.deliverDue();
      const attemptsOf = async (id: string) =>
        (await kg.req('GET', `/admin/webhooks/${id}/messages`, { headers: await kg.operator() })).json
          .messages[0].attempts;
      expect(await attemptsOf(named.id)).toEqual([
        expect.objectContaining({
          status: null,
          error:
            'Not sent: the host resolves to 10.0.0.8, a loopback, private, link-local or unspecified address.',
        }),
      ]);
      const [refusedLocal] = await attemptsOf(local.id);
      expect(refusedLocal.error).toContain('a loopback, private, link-local or unspecified address');
      expect(receiver.received).toEqual([]);
    } finally {
      await kg.close();
      receiver.stop();
    }
  });

  it('drops a message whose endpoint was deleted meanwhile', async () => {
    setup = await webhookSetup(['key.created'], { METRICS_PORT: '9464' });
    const { kg, receiver, deliver } = setup;
    const message = {
      id: newMessageId(kg.time.now),
      endpointId: 'whe_gone',
      type: 'key.created' as const,
      body: '{}',
      createdAt: kg.time.now,
    };
    expect(await kg.keygate.webhooks.store.writeOnce('test:gone', kg.time.now, undefined, [message])).toBe(
      true,
    );
    await deliver();
    expect(receiver.received).toEqual([]);
    expect(await kg.keygate.webhooks.store.queueStats()).toEqual({ depth: 0, oldestCreatedAt: undefined });
    expect(await kg.keygate.metrics?.exposition()).toContain(
      'keygate_webhook_messages_total{event="key.created",outcome="dropped"} 1',
    );
  });

  it('sends a message again on retry (202), with the same webhook-id', async () => {
    setup = await webhookSetup(['key.created']);
    const { kg, receiver, endpoint, deliver } = setup;
    await kg.createKey(1);
    await deliver();
    const [message] = await messagesOf(setup);
    const retry = await kg.req('POST', `/admin/webhooks/${endpoint.id}/messages/${message?.id}/retry`, {
      headers: await kg.operator(),
    });
    expect(retry.status).toBe(202);
    expect(retry.json).toEqual({ result: 'success' });
    await deliver();
    expect(receiver.received.map((entry) => entry.headers['webhook-id'])).toEqual([message?.id, message?.id]);
  });

  it('reports the queue depth and the oldest message age, and keeps delivered messages WEBHOOK_RETENTION_DAYS', async () => {
    setup = await webhookSetup(['key.created'], { METRICS_PORT: '9464', WEBHOOK_RETENTION_DAYS: '7' });
    const { kg, receiver, deliver } = setup;
    receiver.answer(() => ({ status: 500 }));
    await kg.createKey(1);
    await deliver();
    kg.time.now += 3 * SECOND;
    const metrics = await kg.keygate.metrics?.exposition();
    expect(metrics).toContain('keygate_webhook_queue_depth 1');
    expect(metrics).toContain('keygate_webhook_oldest_message_age_seconds 3');
    receiver.answer(() => ({ status: 200 }));
    kg.time.now += 5 * SECOND;
    await deliver();
    expect(await kg.keygate.metrics?.exposition()).toContain('keygate_webhook_queue_depth 0');
    const { store } = kg.keygate.webhooks;
    const clock = () => kg.time.now;
    kg.time.now += 7 * 24 * HOUR - 10 * SECOND;
    expect(await purgeOldWebhookMessages(store, clock, 7)).toBe(0);
    kg.time.now += 10 * SECOND;
    expect(await purgeOldWebhookMessages(store, clock, 7)).toBe(1);
    expect(await messagesOf(setup)).toEqual([]);
  });
});
