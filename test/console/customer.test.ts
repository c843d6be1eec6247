// The customer's console page in a real headless Chromium, against the compiled binary, on the run's
// engine (SQLite, or PostgreSQL with KEYGATE_TEST_DATABASE=postgres): every flow of the customer's page end to end,
// keyboard-only creation, the one-time code, the CSRF refusal, another user's keys never shown, and
// on every page: no request outside keygate's origin, no CSP violation, no console error.
import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from 'bun:test';
import {
  closeBrowser,
  expectClean,
  expectText,
  originOf,
  REFUSED,
  type Server,
  startServer,
  unnamedControls,
  type Watched,
  watchedPage,
} from './browser';

// A browser test waits on a page, a server and a database: more than bun's default 5 s under load.
setDefaultTimeout(30_000);
let server: Server;
beforeAll(async () => {
  server = await startServer();
}, 180_000);
afterAll(async () => {
  await server?.stop();
  await closeBrowser();
});

async function openConsole(
  sub: number,
  options: { level?: number; width?: number; colorScheme?: 'light' | 'dark' } = {},
) {
  const watched = await watchedPage(options);
  await watched.page.goto(`${server.base}${await server.userLink(sub, options.level)}`);
  await watched.page.getByRole('heading', { name: 'Your API keys' }).waitFor();
  return watched;
}

const row = (watched: Watched, key: string) => watched.page.locator(`tr[data-key="${key}"]`);

describe('the one-time link', () => {
  it('opens the page once: the code leaves the address bar, a second use is refused and sets no cookie', async () => {
    const link = await server.userLink(42);
    const first = await watchedPage();
    await first.page.goto(`${server.base}${link}`);
    await first.page.getByRole('heading', { name: 'Your API keys' }).waitFor();
    expect(first.page.url()).toBe(`${server.base}/console`);
    const cookies = await first.context.cookies();
    expect(cookies.map(({ name, httpOnly, sameSite }) => ({ name, httpOnly, sameSite }))).toEqual([
      { name: 'keygate_session', httpOnly: true, sameSite: 'Strict' },
    ]);
    expect(await first.page.evaluate('document.cookie')).toBe('');
    await expectClean(first, server.base);
    await first.close();

    const second = await watchedPage();
    await second.page.goto(`${server.base}${link}`);
    await expectText(
      second.page.getByTestId('signed-out'),
      'This console link was used already or has expired; ask for a new one.',
    );
    expect(await second.context.cookies()).toEqual([]);
    await expectClean(second, server.base, [REFUSED]);
    await second.close();
  }, 30_000);

  it('without a session the page says how to get one', async () => {
    const watched = await watchedPage();
    await watched.page.goto(`${server.base}/console`);
    await expectText(watched.page.getByTestId('signed-out'), /Open the console through a link/);
    await expectClean(watched, server.base, [REFUSED]);
    await watched.close();
  });
});

describe("the customer's keys", () => {
  it('creates a key with the keyboard alone, with visible focus', async () => {
    const watched = await openConsole(50);
    const { page } = watched;
    // From the top of the page: Tab until the create button has the focus.
    for (let tab = 0; tab < 10; tab++) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate('document.activeElement?.textContent')) === 'Create key') break;
    }
    const outline = await page.evaluate('getComputedStyle(document.activeElement).outlineStyle');
    expect(outline).not.toBe('none');
    await page.keyboard.press('Enter');
    await page.getByRole('dialog', { name: 'Create a key' }).waitFor();
    // The dialog opens with the focus on its first field: the name.
    expect(await page.evaluate('document.activeElement.name')).toBe('name');
    await page.keyboard.type('typed with keys');
    await page.keyboard.press('Enter');
    await page.getByTestId('new-secret').waitFor();
    // Escape cannot hide the secret before it is acknowledged, not even pressed again (Chromium lets
    // a page refuse only one Escape per user activation).
    for (let press = 0; press < 3; press++) await page.keyboard.press('Escape');
    await page.getByTestId('new-secret').waitFor();
    expect(await page.getByTestId('new-secret').isVisible()).toBe(true);
    for (let tab = 0; tab < 10; tab++) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate('document.activeElement.type')) === 'checkbox') break;
    }
    await page.keyboard.press('Space');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('rowheader', { name: 'typed with keys' }).waitFor();
    expect(await page.getByTestId('new-secret').count()).toBe(0);
    await expectText(page.getByTestId('notice'), 'Key “typed with keys” created.');
    await expectClean(watched, server.base);
    await watched.close();
  }, 30_000);

  it('every flow: create with settings, copy, edit, disable and enable, rotate, usage, delete', async () => {
    const watched = await openConsole(51);
    const { page, context } = watched;
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: originOf(server.base) });
    const dialog = page.getByRole('dialog', { name: 'Create a key' });
    await page.getByRole('button', { name: 'Create key' }).click();
    await dialog.getByLabel('Name').fill('billing');
    await dialog.getByLabel('Level').selectOption('3');
    await dialog.getByLabel('7 days').check();
    await dialog.getByLabel('Permissions').fill('invoices.read invoices.write');
    await dialog.getByLabel('Meta (JSON, optional)').fill('{"team": "billing"}');
    await dialog.getByLabel('Rate limit').check();
    await dialog.getByLabel('Verifications').fill('100');
    await dialog.getByLabel('Per seconds').fill('60');
    await dialog.getByLabel('Credits').check();
    await dialog.getByLabel('Remaining').fill('1000');
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    const key = await page.getByTestId('new-key').inputValue();
    const secret = await page.getByTestId('new-secret').inputValue();
    await page.getByRole('button', { name: 'Copy secret' }).click();
    await expectText(page.getByTestId('notice'), 'Secret copied.');
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(secret);
    expect(await page.getByRole('button', { name: 'Done' }).isDisabled()).toBe(true);
    await page.getByLabel(/I have copied the secret/).check();
    await page.getByRole('button', { name: 'Done' }).click();
    expect(await server.verify(key, secret)).toMatchObject({ valid: true });

    const keyRow = row(watched, key);
    await expectText(keyRow.locator('td[data-label="Key"]'), `${key.slice(0, 7)}…${key.slice(-4)}`);
    await expectText(keyRow.locator('td[data-label="Permissions"]'), 'invoices.read invoices.write');
    await expectText(keyRow.locator('td[data-label="Level"]'), '3');
    await expectText(keyRow.locator('td[data-label="Status"]'), 'expiring soon');

    // Rename and edit meta.
    await page.getByRole('button', { name: 'Edit billing' }).click();
    const edit = page.getByRole('dialog', { name: 'Edit “billing”' });
    await edit.getByLabel('Name').fill('billing-eu');
    await edit.getByLabel(/Meta/).fill('{"team": "billing", "region": "eu"}');
    await edit.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('rowheader', { name: 'billing-eu' }).waitFor();
    const info = await server.api('GET', `/apikeys/${key}/jwt`, {
      authorization: `Bearer ${await server.token(51)}`,
    });
    expect(info.json.apikey).toMatchObject({ name: 'billing-eu', meta: { team: 'billing', region: 'eu' } });

    // Disable, then enable.
    await page.getByRole('button', { name: 'Disable billing-eu' }).click();
    await expectText(keyRow.locator('td[data-label="Status"]'), 'disabled');
    expect(await server.verify(key, secret)).toMatchObject({ valid: false, code: 'DISABLED' });
    await page.getByRole('button', { name: 'Enable billing-eu' }).click();
    await page.getByRole('button', { name: 'Disable billing-eu' }).waitFor();
    expect(await server.verify(key, secret)).toMatchObject({ valid: true });

    // Usage by hour and by day (the binary writes usage every second).
    await server.usageWritten(51, key, { valid: 2, denied: 1 });
    await page.getByRole('button', { name: 'Usage of billing-eu' }).click();
    const usage = page.getByRole('dialog', { name: 'Usage of “billing-eu”' });
    await expectText(
      { textContent: () => usage.getByRole('img').getAttribute('aria-label') },
      /^2 valid and 1 refused verifications in the last 24 hours, by hour$/,
    );
    await usage.getByRole('button', { name: 'By day' }).click();
    await expectText(
      { textContent: () => usage.getByRole('img').getAttribute('aria-label') },
      /in the last 30 days, by day$/,
    );
    await usage.getByRole('button', { name: 'Close' }).click();

    // Rotate with a grace period: a new secret, shown once; the old key is retiring.
    await page.getByRole('button', { name: 'Rotate billing-eu' }).click();
    const rotate = page.getByRole('dialog', { name: 'Rotate “billing-eu”' });
    await rotate.getByLabel('1 day').check();
    await rotate.getByRole('button', { name: 'Rotate' }).click();
    const newKey = await page.getByTestId('new-key').inputValue();
    const newSecret = await page.getByTestId('new-secret').inputValue();
    await page.getByLabel(/I have copied the secret/).check();
    await page.getByRole('button', { name: 'Done' }).click();
    await expect(keyRow.locator('td[data-label="Status"]'), 'retiring');
    expect(await server.verify(newKey, newSecret)).toMatchObject({ valid: true });
    expect(await server.verify(key, secret)).toMatchObject({ valid: true });

    // Delete after a confirmation: gone, and refused at once.
    await row(watched, newKey).getByRole('button', { name: 'Delete billing-eu' }).click();
    await page
      .getByRole('dialog', { name: 'Delete “billing-eu”?' })
      .getByRole('button', { name: 'Delete key' })
      .click();
    await row(watched, newKey).waitFor({ state: 'detached' });
    await expectText(
      { textContent: () => page.evaluate<string>('document.activeElement.textContent') },
      'Create key',
    );
    expect(await server.verify(newKey, newSecret)).toMatchObject({ valid: false });
    await expectText(page.getByTestId('notice'), 'Key “billing-eu” deleted.');
    await expectClean(watched, server.base);
    await watched.close();
  }, 60_000);

  it("errors show keygate's sentence", async () => {
    const watched = await openConsole(52);
    const { page } = watched;
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create a key' });
    await dialog.getByLabel('Name').fill('   ');
    await dialog.getByLabel('Permissions').fill('no*wildcard*here');
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    const error = page.getByTestId('error');
    await expectText(error, /name|permission/i);
    expect(await error.getAttribute('role')).toBe('alert');
    await expectClean(watched, server.base, [REFUSED]);
    await watched.close();
  });

  it('offers only the levels the session may grant, and the permissions of the policy', async () => {
    const admin = { authorization: `Bearer ${await server.token('ops', { scope: 'keygate:admin' })}` };
    await server.api('PUT', '/admin/users/53/policy', admin, {
      ratelimit: null,
      credits: null,
      maxKeys: null,
      maxLevel: null,
      permissions: ['docs.*', 'search'],
    });
    const watched = await openConsole(53, { level: 4 });
    const { page } = watched;
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create a key' });
    expect(await dialog.getByLabel('Level').locator('option').allTextContents()).toEqual([
      '0',
      '1',
      '2',
      '3',
      '4',
    ]);
    await dialog.getByLabel('Name').fill('docs reader');
    await dialog.getByRole('checkbox', { name: 'search' }).check();
    await dialog.getByLabel('Other permissions').fill('docs.read billing.read');
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    await expectText(page.getByTestId('error'), /billing\.read/);
    await dialog.getByLabel('Other permissions').fill('docs.read');
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    await page.getByTestId('new-secret').waitFor();
    await expectClean(watched, server.base, [REFUSED]);
    await watched.close();
  }, 30_000);

  it('refuses a change without the CSRF token (403), from the page itself', async () => {
    const watched = await openConsole(54);
    const answer = await watched.page.evaluate(async () => {
      const response = await fetch('console/api/apikeys/session', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'forged', level: 0, expiresIn: 60 }),
      });
      return { status: response.status, body: await response.json() };
    });
    expect(answer).toEqual({
      status: 403,
      body: {
        result: 'error',
        error: "A console change must carry the session's CSRF token (X-Keygate-CSRF).",
      },
    });
    await watched.page.reload();
    await watched.page.getByText('No keys yet').waitFor();
    await expectClean(watched, server.base, [REFUSED]);
    await watched.close();
  });

  it("never shows another user's keys, nor reaches them", async () => {
    const theirs = await server.createKey(56, { name: 'theirs', level: 0, expiresIn: 3600 });
    await server.createKey(55, { name: 'mine', level: 0, expiresIn: 3600 });
    const watched = await openConsole(55);
    const { page } = watched;
    await page.getByRole('rowheader', { name: 'mine' }).waitFor();
    expect(await page.getByRole('rowheader').allTextContents()).toEqual(['mine']);
    expect(await page.content()).not.toContain(theirs.key);
    const status = await page.evaluate(
      async (key) => (await fetch(`console/api/apikeys/${key}/session`)).status,
      theirs.key,
    );
    expect(status).toBe(404);
    await expectClean(watched, server.base, [REFUSED]);
    await watched.close();
  });

  it('pages past 50 keys', async () => {
    for (let index = 0; index < 53; index++) {
      await server.createKey(57, {
        name: `key ${String(index).padStart(2, '0')}`,
        level: 0,
        expiresIn: 3600,
      });
    }
    const watched = await openConsole(57);
    const { page } = watched;
    await page.getByRole('rowheader', { name: 'key 52' }).waitFor();
    expect(await page.locator('tbody tr').count()).toBe(50);
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByRole('rowheader', { name: 'key 00' }).waitFor();
    expect(await page.locator('tbody tr').count()).toBe(3);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.getByRole('rowheader', { name: 'key 52' }).waitFor();
    await expectClean(watched, server.base);
    await watched.close();
  }, 60_000);

  it('names every control (buttons, fields) for assistive technology, dialogs included', async () => {
    await server.createKey(59, { name: 'named', level: 0, expiresIn: 3600 });
    const watched = await openConsole(59);
    const { page } = watched;
    await page.getByRole('rowheader', { name: 'named' }).waitFor();
    expect(await unnamedControls(page)).toEqual([]);
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('dialog', { name: 'Create a key' }).getByLabel('Rate limit').check();
    await page.getByRole('dialog', { name: 'Create a key' }).getByLabel('Credits').check();
    expect(await unnamedControls(page)).toEqual([]);
    await page.keyboard.press('Escape');
    await page.getByRole('button', { name: 'Usage of named' }).click();
    await page.getByRole('dialog', { name: 'Usage of “named”' }).waitFor();
    expect(await unnamedControls(page)).toEqual([]);
    await expectClean(watched, server.base);
    await watched.close();
  });

  it('logs out: the session ends and the page says so', async () => {
    const watched = await openConsole(58);
    await watched.page.getByRole('button', { name: 'Log out' }).click();
    await watched.page.getByTestId('signed-out').waitFor();
    await watched.page.reload();
    await expectText(watched.page.getByTestId('signed-out'), /Open the console through a link/);
    await expectClean(watched, server.base, [REFUSED]);
    await watched.close();
  });
});
