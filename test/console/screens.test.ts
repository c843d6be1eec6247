// The console as people see it: the first load's weight and time (the budget: at most 150 KB
// compressed, usable within 1 s), and screenshots of each page at 375 px and 1280 px, light and
// dark. The screenshots go to docs/console/ with KEYGATE_UPDATE_SCREENSHOTS=1 (they are committed and
// shown in docs/console.md), else to a scratch directory, so a test run leaves the tree clean.
import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from 'bun:test';
import { mkdirSync, mkdtempSync, statSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEST_ENGINE } from '../support/postgres';
import { closeBrowser, type Server, startServer, type Watched, watchedPage } from './browser';

const BUDGET_BYTES = 150 * 1024;
const BUDGET_MS = 1000;
const SHOTS =
  process.env.KEYGATE_UPDATE_SCREENSHOTS === '1'
    ? join(import.meta.dir, '..', '..', 'docs', 'console')
    : mkdtempSync(join(tmpdir(), 'keygate-screens-'));

// A browser test waits on a page, a server and a database: more than bun's default 5 s under load.
setDefaultTimeout(30_000);
let server: Server;
const USER = 80;
beforeAll(async () => {
  // An http endpoint on loopback, for the webhooks screen: nothing listens there, nothing leaves.
  server = await startServer({ WEBHOOK_ALLOW_PRIVATE: 'true' });
  const admin = { authorization: `Bearer ${await server.token('ops', { scope: 'keygate:admin' })}` };
  await server.api('POST', '/admin/webhooks', admin, {
    url: 'http://127.0.0.1:9/keygate-events',
    events: ['key.created', 'key.deleted', 'key.leaked'],
    description: 'billing service',
  });
  const production = await server.createKey(USER, {
    name: 'production',
    level: 3,
    expiresIn: 31_536_000,
    permissions: ['documents.read', 'documents.write'],
    ratelimit: { limit: 100, duration: 60 },
  });
  for (let index = 0; index < 5; index++) await server.verify(production.key, production.secret);
  const old = await server.createKey(USER, { name: 'staging', level: 2, expiresIn: 7_776_000 });
  const user = { authorization: `Bearer ${await server.token(USER)}` };
  await server.api('POST', `/apikeys/${old.key}/rotate/jwt`, user, { gracePeriod: 86_400 });
  const disabled = await server.createKey(USER, { name: 'old integration', level: 1, expiresIn: 2_592_000 });
  await server.api('PATCH', `/apikeys/${disabled.key}/jwt`, user, { enabled: false });
  await server.createKey(USER, { name: 'ci', level: 0, expiresIn: 172_800, meta: { team: 'platform' } });
  await server.usageWritten(USER, production.key, { valid: 5 });
}, 180_000);
afterAll(async () => {
  await server?.stop();
  await closeBrowser();
});

async function shoot(watched: Watched, name: string) {
  mkdirSync(SHOTS, { recursive: true });
  const path = join(SHOTS, `${name}.png`);
  await watched.page.screenshot({ path, animations: 'disabled' });
  expect(statSync(path).size).toBeGreaterThan(1000);
}

describe('the budget', () => {
  it('the first load of the customer page is at most 150 KB compressed and usable within 1 s', async () => {
    // Three first loads, each in a fresh context (no cache, no cookie): the median is the figure.
    const loads: Array<{ usableMs: number; compressed: number; uncompressed: number; requests: number }> = [];
    for (let load = 0; load < 3; load++) {
      const link = await server.userLink(USER);
      const watched = await watchedPage();
      await watched.page.goto(`${server.base}${link}`);
      await watched.page.getByRole('rowheader', { name: 'production' }).waitFor();
      await watched.page.getByRole('button', { name: 'Create key' }).waitFor();
      // The browser's own clock, from the start of the navigation: the keys table is shown and usable.
      const usableMs = Math.round(await watched.page.evaluate<number>('performance.now()'));
      // Everything the first load fetched: the page, its files, the session, the list and the sparklines.
      await watched.page.getByRole('img', { name: /5 valid verifications in the last 30 days/ }).waitFor();
      await Bun.sleep(300);
      const weights = await watched.page.evaluate<Array<{ encoded: number; decoded: number }>>(`
        performance.getEntries()
          .filter((entry) => entry.entryType === 'navigation' || entry.entryType === 'resource')
          .map((entry) => ({ encoded: entry.encodedBodySize, decoded: entry.decodedBodySize }))
      `);
      loads.push({
        usableMs,
        compressed: weights.reduce((sum, entry) => sum + entry.encoded, 0),
        uncompressed: weights.reduce((sum, entry) => sum + entry.decoded, 0),
        requests: weights.length,
      });
      await watched.close();
    }
    const median = [...loads].sort((a, b) => a.usableMs - b.usableMs)[1] as (typeof loads)[number];
    console.log(
      `console first load (${TEST_ENGINE}): ${median.requests} requests, ${(median.compressed / 1024).toFixed(1)} KB ` +
        `compressed (${(median.uncompressed / 1024).toFixed(1)} KB uncompressed), usable after ` +
        `${loads.map((load) => load.usableMs).join(', ')} ms (median ${median.usableMs} ms)`,
    );
    for (const load of loads) expect(load.compressed).toBeLessThanOrEqual(BUDGET_BYTES);
    // The time is the machine's as much as the console's: on a machine that other work keeps far
    // busier than its cores (a benchmark beside the tests), it is reported, not judged.
    const [load] = loadavg();
    if ((load ?? 0) > cpus().length * 3) {
      console.log(`load average ${load?.toFixed(1)} on ${cpus().length} cores: the 1 s budget is not judged`);
    } else {
      expect(median.usableMs).toBeLessThanOrEqual(BUDGET_MS);
    }
  }, 30_000);
});

describe.skipIf(TEST_ENGINE === 'postgres')(
  'screenshots (the same pages on either engine: taken on SQLite)',
  () => {
    for (const colorScheme of ['light', 'dark'] as const) {
      for (const width of [1280, 375]) {
        it(`the customer's page and the operator's user view at ${width} px, ${colorScheme}`, async () => {
          const customer = await watchedPage({ width, height: width === 375 ? 812 : 800, colorScheme });
          await customer.page.goto(`${server.base}${await server.userLink(USER)}`);
          await customer.page.getByRole('rowheader', { name: 'production' }).waitFor();
          await customer.page.getByRole('img', { name: /5 valid verifications/ }).waitFor();
          await shoot(customer, `customer-${width}-${colorScheme}`);
          // One of each dialog is enough: usage in dark, create and the secret in light.
          if (width === 1280 && colorScheme === 'dark') {
            await customer.page.getByRole('button', { name: 'Usage of production' }).click();
            await customer.page.getByRole('img', { name: /valid and \d+ refused/ }).waitFor();
            await shoot(customer, `usage-${width}-${colorScheme}`);
            await customer.page.getByRole('button', { name: 'Close' }).click();
          }
          if (width === 1280 && colorScheme === 'light') {
            await customer.page.getByRole('button', { name: 'Create key' }).click();
            await customer.page
              .getByRole('dialog', { name: 'Create a key' })
              .getByLabel('Name')
              .fill('reporting');
            await shoot(customer, `create-${width}-${colorScheme}`);
            await customer.page.getByRole('button', { name: 'Create', exact: true }).click();
            await customer.page.getByTestId('new-secret').waitFor();
            await shoot(customer, `secret-${width}-${colorScheme}`);
          }
          await customer.close();

          const operator = await watchedPage({ width, height: width === 375 ? 812 : 800, colorScheme });
          await operator.page.goto(`${server.base}${await server.operatorLink()}`);
          await operator.page.getByLabel('User id, key id (or its start) or key name').fill(String(USER));
          await operator.page.getByRole('button', { name: 'Find', exact: true }).click();
          await operator.page.getByRole('rowheader', { name: 'production' }).waitFor();
          await shoot(operator, `operator-${width}-${colorScheme}`);
          if (width === 1280 && colorScheme === 'dark') {
            await operator.page
              .getByRole('heading', { name: `Policy of user ${USER}` })
              .scrollIntoViewIfNeeded();
            await shoot(operator, `operator-policy-${width}-${colorScheme}`);
          }
          if (width === 1280 && colorScheme === 'light') {
            await operator.page.getByRole('button', { name: 'Webhooks' }).click();
            await operator.page.getByRole('heading', { name: 'Webhook endpoints' }).waitFor();
            await shoot(operator, `webhooks-${width}-${colorScheme}`);
          }
          await operator.close();
        }, 60_000);
      }
    }
  },
);
