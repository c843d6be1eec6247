// The operator's webhooks screen in a real headless Chromium, against the compiled binary, on the
// run's engine: add an endpoint (a local receiver) with its signing secret shown once, list it,
// disable and enable it, rotate its secret, see the messages a new key sends and their attempts,
// retry one, delete the endpoint; and, while the webhook API is not in this build, keygate's 404
// sentence on the screen instead of a crash.
import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from 'bun:test';
import {
  closeBrowser,
  expectClean,
  expectText,
  REFUSED,
  type Server,
  startServer,
  unnamedControls,
  watchedPage,
} from './browser';

setDefaultTimeout(30_000);
let server: Server;
let receiver: ReturnType<typeof Bun.serve> | undefined;
/** What the receiver was sent: each message's webhook-id and its type. */
const received: Array<{ id: string; type: string }> = [];

beforeAll(async () => {
  // http://127.0.0.1 endpoints are refused unless WEBHOOK_ALLOW_PRIVATE=true.
  server = await startServer({ WEBHOOK_ALLOW_PRIVATE: 'true' });
  // The endpoints' receiver: answers 200 to every message and notes it.
  receiver = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const body = (await request.json()) as { type: string };
      received.push({ id: request.headers.get('webhook-id') ?? '', type: body.type });
      return new Response('ok');
    },
  });
}, 180_000);
afterAll(async () => {
  await server?.stop();
  receiver?.stop(true);
  await closeBrowser();
});

async function openWebhooks(options: { width?: number; colorScheme?: 'light' | 'dark' } = {}) {
  const watched = await watchedPage(options);
  await watched.page.goto(`${server.base}${await server.operatorLink()}`);
  await watched.page.getByRole('button', { name: 'Webhooks' }).click();
  await watched.page.getByRole('heading', { name: 'Webhook endpoints' }).waitFor();
  return watched;
}

describe('the webhooks screen', () => {
  it('adds, lists, disables and enables, rotates, shows the messages, retries one and deletes', async () => {
    const url = `http://127.0.0.1:${receiver?.port}/hook`;
    const admin = { authorization: `Bearer ${await server.token('ops', { scope: 'keygate:admin' })}` };
    const watched = await openWebhooks();
    const { page } = watched;
    await page.getByText('No webhook endpoints yet.').waitFor();

    // Add: the signing secret shown once, which Escape cannot hide before it is acknowledged.
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const add = page.getByRole('dialog', { name: 'Add a webhook endpoint' });
    await add.getByLabel('URL').fill(url);
    await add.getByLabel('key.created').check();
    await add.getByLabel('key.deleted').check();
    await add.getByLabel('Description (optional)').fill('local receiver');
    await add.getByRole('button', { name: 'Add endpoint' }).click();
    await expectText(page.getByTestId('notice'), `Endpoint ${url} added.`);
    const secret = await page.getByTestId('webhook-secret').inputValue();
    expect(secret).toMatch(/^whsec_/);
    for (let press = 0; press < 3; press++) await page.keyboard.press('Escape');
    await page.getByTestId('webhook-secret').waitFor();
    expect(await page.getByTestId('webhook-secret').isVisible()).toBe(true);
    expect(await unnamedControls(page)).toEqual([]);
    await page.getByLabel(/I have copied the secret/).check();
    await page.getByRole('button', { name: 'Done' }).click();
    expect(await page.getByTestId('webhook-secret').count()).toBe(0);

    // Listed, as the API lists it.
    const listed = await server.api('GET', '/admin/webhooks', admin);
    expect(listed.json.endpoints).toHaveLength(1);
    const id = listed.json.endpoints[0].id as string;
    const row = page.locator(`tr[data-endpoint="${id}"]`);
    await expectText(row.locator('th[data-label="URL"]'), url);
    await expectText(row.locator('td[data-label="Events"]'), 'key.created key.deleted');

    // Disable, enable.
    await page.getByRole('button', { name: 'Disable local receiver' }).click();
    await expectText(row.locator('td[data-label="Status"]'), 'disabled');
    expect((await server.api('GET', `/admin/webhooks/${id}`, admin)).json.endpoint.enabled).toBe(false);
    await page.getByRole('button', { name: 'Enable local receiver' }).click();
    await expectText(row.locator('td[data-label="Status"]'), 'enabled');
    expect((await server.api('GET', `/admin/webhooks/${id}`, admin)).json.endpoint.enabled).toBe(true);

    // Rotate the secret: a new one, shown once, both signing for 24 hours.
    await page.getByRole('button', { name: 'Rotate the secret of local receiver' }).click();
    await page
      .getByRole('dialog', { name: 'Rotate the signing secret of local receiver?' })
      .getByRole('button', { name: 'Rotate secret' })
      .click();
    const rotated = await page.getByTestId('webhook-secret').inputValue();
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    await page.getByText(/For 24 hours every message is signed with both/).waitFor();
    await page.getByLabel(/I have copied the secret/).check();
    await page.getByRole('button', { name: 'Done' }).click();

    // A new key sends key.created: its message is listed, delivered, with its attempt.
    await server.createKey(90, { name: 'hooked', level: 0, expiresIn: 3600 });
    for (const deadline = Date.now() + 10_000; received.length === 0; await Bun.sleep(50)) {
      if (Date.now() > deadline) throw new Error('the receiver got no message within 10 s');
    }
    const messageId = received[0]?.id ?? '';
    await page.getByRole('button', { name: 'Messages of local receiver' }).click();
    const messages = page.getByRole('region', { name: 'Messages to local receiver' });
    const message = messages.locator(`tbody[data-message="${messageId}"]`);
    for (const deadline = Date.now() + 10_000; ; await Bun.sleep(200)) {
      const status = await message
        .locator('td[data-label="Status"]')
        .textContent({ timeout: 1000 })
        .catch(() => null);
      if (status === 'delivered') break;
      if (Date.now() > deadline) throw new Error(`the message is ${status}, not delivered`);
      await messages.getByRole('button', { name: 'Refresh' }).click();
    }
    await expectText(message.locator('th[data-label="Event"]'), 'key.created');
    await message.getByRole('button', { name: `Attempts of ${messageId}: 1` }).click();
    await expectText(message.getByRole('list', { name: `Attempts of ${messageId}` }), /HTTP 200/);

    // Retry: the receiver gets the same webhook-id again.
    await message.getByRole('button', { name: `Retry ${messageId}` }).click();
    await expectText(page.getByTestId('notice'), `Message ${messageId} will be sent again.`);
    for (const deadline = Date.now() + 10_000; received.filter((m) => m.id === messageId).length < 2; ) {
      if (Date.now() > deadline) throw new Error('the retried message did not arrive within 10 s');
      await Bun.sleep(50);
    }
    expect(await unnamedControls(page)).toEqual([]);

    // Delete, after a confirmation.
    await page.getByRole('button', { name: 'Delete local receiver' }).click();
    await page
      .getByRole('dialog', { name: 'Delete local receiver?' })
      .getByRole('button', { name: 'Delete endpoint' })
      .click();
    await expectText(page.getByTestId('notice'), 'Endpoint local receiver deleted.');
    await page.getByText('No webhook endpoints yet.').waitFor();
    expect((await server.api('GET', '/admin/webhooks', admin)).json.endpoints).toEqual([]);
    await expectClean(watched, server.base);
    await watched.close();
  }, 60_000);

  it("shows keygate's sentence when the server refuses (an unknown event, an endpoint gone)", async () => {
    const admin = { authorization: `Bearer ${await server.token('ops', { scope: 'keygate:admin' })}` };
    const watched = await openWebhooks({ width: 375, colorScheme: 'dark' });
    const { page } = watched;
    // No event picked: the server's 400 sentence, not a rule of the page's.
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const add = page.getByRole('dialog', { name: 'Add a webhook endpoint' });
    await add.getByLabel('URL').fill(`http://127.0.0.1:${receiver?.port}/none`);
    await add.getByRole('button', { name: 'Add endpoint' }).click();
    const refused = await server.api('POST', '/admin/webhooks', admin, {
      url: `http://127.0.0.1:${receiver?.port}/none`,
      events: [],
    });
    expect(refused.status).toBe(400);
    await expectText(page.getByTestId('error'), refused.json.error);
    await add.getByRole('button', { name: 'Cancel' }).click();

    // An endpoint deleted behind the page's back: its messages answer 404, in keygate's words.
    const created = await server.api('POST', '/admin/webhooks', admin, {
      url: `http://127.0.0.1:${receiver?.port}/gone`,
      events: ['*'],
      description: 'gone soon',
    });
    expect(created.status).toBe(201);
    await page.getByRole('button', { name: 'Users and keys' }).click();
    await page.getByRole('button', { name: 'Webhooks' }).click();
    await expectText(
      page.locator(`tr[data-endpoint="${created.json.endpoint.id}"] td[data-label="Events"]`),
      'all',
    );
    const gone = await server.api('DELETE', `/admin/webhooks/${created.json.endpoint.id}`, admin);
    expect(gone.status).toBe(204);
    await page.getByRole('button', { name: 'Messages of gone soon' }).click();
    const missing = await server.api('GET', `/admin/webhooks/${created.json.endpoint.id}/messages`, admin);
    expect(missing.status).toBe(404);
    await expectText(
      page.getByRole('region', { name: 'Messages to gone soon' }).getByRole('alert'),
      missing.json.error,
    );
    await expectClean(watched, server.base, [REFUSED]);
    await watched.close();
  });
});
