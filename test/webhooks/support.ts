// A webhook receiver on 127.0.0.1 whose answer a test chooses, and a keygate with one endpoint
// pointing at it: what the webhook tests share.
import { Webhook } from 'standardwebhooks';
import { type TestKeygate, testKeygate } from '../support/keygate';

export type Received = {
  headers: Record<string, string>;
  body: string;
  json: { type: string; timestamp: string; data: Record<string, unknown> };
};

/** How the receiver answers: a status (with headers), or never (it hangs). */
export type Answer = { status: number; headers?: Record<string, string> } | 'hang';

export function startReceiver() {
  const received: Received[] = [];
  let answer: (request: Received) => Answer = () => ({ status: 204 });
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const body = await request.text();
      const entry: Received = { headers: Object.fromEntries(request.headers), body, json: JSON.parse(body) };
      received.push(entry);
      const chosen = answer(entry);
      if (chosen === 'hang') return new Promise<Response>(() => undefined);
      return new Response(null, { status: chosen.status, headers: chosen.headers });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/hooks`,
    received,
    answer(next: (request: Received) => Answer) {
      answer = next;
    },
    types: () => received.map((entry) => entry.json.type),
    stop: () => server.stop(true),
  };
}

export type Receiver = ReturnType<typeof startReceiver>;

/** Creates an endpoint through the operator's route; its id and secret. */
export async function createEndpoint(
  kg: TestKeygate,
  url: string,
  events: string[] = ['*'],
): Promise<{ id: string; secret: string }> {
  const response = await kg.req('POST', '/admin/webhooks', {
    headers: await kg.operator(),
    body: { url, events },
  });
  if (response.status !== 201) throw new Error(`endpoint not created: ${response.status} ${response.text}`);
  return { id: response.json.endpoint.id, secret: response.json.secret };
}

/** A keygate that may send to 127.0.0.1, a receiver, and an endpoint for `events`. */
export async function webhookSetup(
  events: string[] = ['*'],
  env: Record<string, string> = {},
  options: Parameters<typeof testKeygate>[1] = {},
) {
  const kg = await testKeygate({ WEBHOOK_ALLOW_PRIVATE: 'true', ...env }, options);
  const receiver = startReceiver();
  const endpoint = await createEndpoint(kg, receiver.url, events);
  const deliver = () => kg.keygate.webhooks.sender.deliverDue();
  return {
    kg,
    receiver,
    endpoint,
    deliver,
    async close() {
      await kg.close();
      receiver.stop();
    },
  };
}

/** The payload as the standard's own library verifies it (throws when the signature is wrong). */
export function verified(secret: string, entry: Received): unknown {
  return new Webhook(secret).verify(entry.body, {
    'webhook-id': entry.headers['webhook-id'] as string,
    'webhook-timestamp': entry.headers['webhook-timestamp'] as string,
    'webhook-signature': entry.headers['webhook-signature'] as string,
  });
}

/** Fails when a body holds anything secret: a `secret` or hash property, or one of `secrets`. */
export function assertNoSecrets(body: string, secrets: readonly string[]): void {
  const json = JSON.parse(body);
  const keys = new Set<string>();
  const walk = (value: unknown) => {
    if (value && typeof value === 'object') {
      for (const [name, inner] of Object.entries(value)) {
        keys.add(name);
        walk(inner);
      }
    }
  };
  walk(json);
  for (const forbidden of ['secret', 'secretHash', 'secret_hash', 'hash', 'token']) {
    if (keys.has(forbidden)) throw new Error(`the body has a ${forbidden} property: ${body}`);
  }
  for (const secret of secrets) {
    if (body.includes(secret)) throw new Error(`the body holds a secret: ${body}`);
  }
}
