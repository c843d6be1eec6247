// The operator's console in a real headless Chromium, against the compiled binary, on the run's
// engine: find a user (by id; by issuer and subject with mapped ids) or a key, a user's keys of every
// level with the owner's actions, the policy editor, the user's usage, revoke-all after typing the
// user id (which also ends the user's console sessions), and the overview.
import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from 'bun:test';
import {
  closeBrowser,
  expectClean,
  expectText,
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
let mapped: Server;
beforeAll(async () => {
  server = await startServer();
  mapped = await startServer({ JWT_USER_IDS: 'mapped' });
}, 180_000);
afterAll(async () => {
  await server?.stop();
  await mapped?.stop();
  await closeBrowser();
});

async function openOperator(
  on: Server = server,
  options: { width?: number; colorScheme?: 'light' | 'dark' } = {},
) {
  const watched = await watchedPage(options);
  await watched.page.goto(`${on.base}${await on.operatorLink()}`);
  await watched.page.getByRole('heading', { name: 'Find a user or a key' }).waitFor();
  return watched;
}

async function findUser(watched: Watched, query: string) {
  await watched.page.getByLabel('User id, key id (or its start) or key name').fill(query);
  await watched.page.getByRole('button', { name: 'Find', exact: true }).click();
}

describe("the operator's console", () => {
  it("finds a user by id and acts on the user's keys of every level", async () => {
    const high = await server.createKey(60, { name: 'top level', level: 8, expiresIn: 86_400 * 90 });
    const low = await server.createKey(60, { name: 'low level', level: 1, expiresIn: 86_400 * 90 });
    await server.createKey(61, { name: 'not theirs', level: 1, expiresIn: 3600 });
    const watched = await openOperator();
    const { page } = watched;
    await findUser(watched, '60');
    await page.getByRole('heading', { name: 'Keys of user 60' }).waitFor();
    await page.getByRole('rowheader', { name: 'top level' }).waitFor();
    const keysTable = page.getByRole('table', { name: 'Keys of user 60' });
    expect((await keysTable.getByRole('rowheader').allTextContents()).sort()).toEqual([
      'low level',
      'top level',
    ]);

    // Disable (the operator acting for the user), then rotate with no grace period.
    await page.getByRole('button', { name: 'Disable top level' }).click();
    await expectText(page.locator(`tr[data-key="${high.key}"] td[data-label="Status"]`), 'disabled');
    expect(await server.verify(high.key, high.secret)).toMatchObject({ valid: false, code: 'DISABLED' });
    await page.getByRole('button', { name: 'Rotate low level' }).click();
    const rotate = page.getByRole('dialog', { name: 'Rotate “low level”' });
    await rotate.getByLabel('None: the old key stops now').check();
    await rotate.getByRole('button', { name: 'Rotate' }).click();
    const newKey = await page.getByTestId('new-key').inputValue();
    const newSecret = await page.getByTestId('new-secret').inputValue();
    await page.getByLabel(/I have copied the secret/).check();
    await page.getByRole('button', { name: 'Done' }).click();
    expect(await server.verify(newKey, newSecret)).toMatchObject({ valid: true });
    expect(await server.verify(low.key, low.secret)).toMatchObject({ valid: false });
    expect(server.log()).toContain('"msg":"apikey.rotated"');
    expect(server.log()).toMatch(/"msg":"apikey\.rotated"[^\n]*"by":"admin:ops"/);

    expect(await unnamedControls(page)).toEqual([]);
    // The user's usage, by hour and by day.
    const usage = page.getByRole('region', { name: 'Usage of user 60' });
    await expectText({ textContent: () => usage.getByRole('img').getAttribute('aria-label') }, /by hour$/);
    await usage.getByRole('button', { name: 'By day' }).click();
    await expectText({ textContent: () => usage.getByRole('img').getAttribute('aria-label') }, /by day$/);
    await expectClean(watched, server.base);
    await watched.close();
  }, 60_000);

  it("edits the user's policy, which then binds the user's own console", async () => {
    const watched = await openOperator();
    const { page } = watched;
    await findUser(watched, '62');
    const policy = page.getByRole('region', { name: 'Policy of user 62' });
    await policy.getByLabel('Highest level').fill('2');
    await policy.getByLabel('Most keys').fill('5');
    await policy.getByLabel(/Permissions the keys may hold/).fill('docs.* search');
    await policy.getByRole('button', { name: 'Save policy' }).click();
    await expectText(page.getByTestId('notice'), 'Policy of user 62 saved.');
    const admin = { authorization: `Bearer ${await server.token('ops', { scope: 'keygate:admin' })}` };
    const stored = await server.api('GET', '/admin/users/62/policy', admin);
    expect(stored.json.policy).toEqual({
      ratelimit: null,
      credits: null,
      maxKeys: 5,
      maxLevel: 2,
      permissions: ['docs.*', 'search'],
    });
    // A bad value: keygate's sentence.
    await policy.getByLabel('Highest level').fill('9');
    await policy.getByRole('button', { name: 'Save policy' }).click();
    await expectText(page.getByTestId('error'), /maxLevel/);
    await expectClean(watched, server.base, [REFUSED]);
    await watched.close();

    const user = await watchedPage();
    await user.page.goto(`${server.base}${await server.userLink(62)}`);
    await user.page.getByRole('button', { name: 'Create key' }).click();
    const levels = user.page
      .getByRole('dialog', { name: 'Create a key' })
      .getByLabel('Level')
      .locator('option');
    expect(await levels.allTextContents()).toEqual(['0', '1', '2']);
    await expectClean(user, server.base);
    await user.close();
  }, 60_000);

  it("revokes every key of a user only after the user id is typed, and ends the user's sessions", async () => {
    await server.createKey(63, { name: 'one', level: 0, expiresIn: 3600 });
    const two = await server.createKey(63, { name: 'two', level: 0, expiresIn: 3600 });
    const user = await watchedPage();
    await user.page.goto(`${server.base}${await server.userLink(63)}`);
    await user.page.getByRole('rowheader', { name: 'two' }).waitFor();

    const watched = await openOperator();
    const { page } = watched;
    await findUser(watched, '63');
    await page.getByRole('rowheader', { name: 'two' }).waitFor();
    await page.getByRole('button', { name: 'Revoke all keys…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke every key of user 63?' });
    const confirm = dialog.getByRole('button', { name: 'Revoke all keys' });
    expect(await confirm.isDisabled()).toBe(true);
    await dialog.getByLabel(/Type the user id/).fill('36');
    expect(await confirm.isDisabled()).toBe(true);
    await dialog.getByLabel(/Type the user id/).fill('63');
    await confirm.click();
    await expectText(page.getByTestId('notice'), 'Revoked 2 keys of user 63.');
    await page.getByText('No keys yet').waitFor();
    expect(await server.verify(two.key, two.secret)).toMatchObject({ valid: false });
    await expectClean(watched, server.base);
    await watched.close();

    // The user's console session ended with the keys.
    await user.page.reload();
    await expectText(user.page.getByTestId('signed-out'), /Open the console through a link/);
    await expectClean(user, server.base, [REFUSED]);
    await user.close();
  }, 60_000);

  it('finds a key by its id and opens its user', async () => {
    const key = await server.createKey(64, { name: 'found by id', level: 2, expiresIn: 3600 });
    const watched = await openOperator();
    await findUser(watched, key.key);
    await watched.page.getByRole('heading', { name: 'Keys of user 64' }).waitFor();
    await watched.page.getByRole('rowheader', { name: 'found by id' }).waitFor();
    await expectClean(watched, server.base);
    await watched.close();
  }, 30_000);

  it('with mapped user ids, finds a user by issuer and subject', async () => {
    const token = await mapped.token('auth0|5f1b2c');
    const created = await mapped.api(
      'POST',
      '/apikeys/jwt',
      { authorization: `Bearer ${token}` },
      { name: 'mapped key', level: 0, expiresIn: 3600 },
    );
    expect(created.status).toBe(201);
    const watched = await openOperator(mapped);
    const { page } = watched;
    await page.getByLabel(/Subject \(sub\)/).fill('auth0|5f1b2c');
    await page.getByRole('button', { name: 'Find user' }).click();
    await page.getByRole('heading', { name: `Keys of user ${created.json.apikey.userId}` }).waitFor();
    await page.getByRole('rowheader', { name: 'mapped key' }).waitFor();
    await expectClean(watched, mapped.base);
    await watched.close();
  }, 30_000);
});

describe("the operator's lookups", () => {
  it('finds keys by a part of their name or an id prefix, and opens their user', async () => {
    const key = await server.createKey(70, { name: 'Invoice Sync', level: 0, expiresIn: 3600 });
    const watched = await openOperator();
    const { page } = watched;
    await findUser(watched, 'invoice');
    const results = page.getByRole('table', { name: 'Keys found' });
    await results.getByRole('rowheader', { name: 'Invoice Sync' }).waitFor();
    await findUser(watched, key.key.slice(0, 12));
    await results.getByRole('rowheader', { name: 'Invoice Sync' }).waitFor();
    await results.getByRole('button', { name: 'Open user 70' }).click();
    await page.getByRole('heading', { name: 'Keys of user 70' }).waitFor();
    await expectClean(watched, server.base);
    await watched.close();
  }, 30_000);

  it('lists users', async () => {
    await server.createKey(71, { name: 'listed', level: 0, expiresIn: 3600 });
    const watched = await openOperator();
    await watched.page.getByRole('button', { name: 'List users' }).click();
    await watched.page
      .getByRole('table', { name: 'Users' })
      .getByRole('button', { name: /User 71/ })
      .click();
    await watched.page.getByRole('heading', { name: 'Keys of user 71' }).waitFor();
    await expectClean(watched, server.base);
    await watched.close();
  }, 30_000);

  it('shows the overview: keys alive, created, verifications by code, top keys and users', async () => {
    const key = await server.createKey(72, { name: 'busy', level: 0, expiresIn: 3600 });
    await server.verify(key.key, key.secret);
    await server.usageWritten(72, key.key, { valid: 1 });
    const watched = await openOperator();
    const { page } = watched;
    await page.getByRole('button', { name: 'Overview' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page
      .getByRole('table', { name: 'Verifications by code' })
      .getByRole('rowheader', { name: 'VALID' })
      .waitFor();
    await page.getByRole('table', { name: 'Top keys, 24 hours' }).getByText('busy').waitFor();
    await expectClean(watched, server.base);
    await watched.close();
  }, 30_000);
});
