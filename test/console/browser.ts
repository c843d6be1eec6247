// The browser tests' world: the compiled keygate (built once per run) serving on a fresh database of
// the run's engine, one headless Chromium (Debian's, driven by playwright-core; nothing downloaded),
// and pages that record every request, console error and CSP violation so each test can say none
// happened. The tests sign tokens with the server's secret and ask the API for links, as a host
// application would.
import { expect } from 'bun:test';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { createJwtAuthority } from '../../src/auth/jwt';
import { buildBinary, readStartLine } from '../support/binary';
import { ensureDebianPackages } from '../support/debian-packages';
import { freshPostgresDatabase, TEST_ENGINE } from '../support/postgres';

export const SECRET = 'browser-test-secret-that-is-at-least-32-bytes';
const CHROMIUM = process.env.KEYGATE_CHROMIUM ?? '/usr/bin/chromium';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-console-'));
// The binary serves every browser test file of the run; it goes when the run ends.
process.on('exit', () => rmSync(scratch, { recursive: true, force: true }));
let built: string | undefined;
let browser: Browser | undefined;

/** The binary, compiled the first time a test asks. */
export function binary(): string {
  if (built === undefined) {
    const path = join(scratch, 'keygate');
    buildBinary(path);
    built = path;
  }
  return built;
}

export async function theBrowser(): Promise<Browser> {
  if (!ensureDebianPackages(['chromium'], () => existsSync(CHROMIUM))) {
    throw new Error(
      `No Chromium at ${CHROMIUM}: apt-get install chromium (as .ci/run does), or set KEYGATE_CHROMIUM.`,
    );
  }
  browser ??= await chromium.launch({
    executablePath: CHROMIUM,
    // As root (CI) Chromium needs --no-sandbox.
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
  });
  return browser;
}

/** After a file's tests: the browser closes (the next file launches its own). */
export async function closeBrowser(): Promise<void> {
  await browser?.close();
  browser = undefined;
}

export type Server = Awaited<ReturnType<typeof startServer>>;

/** A keygate binary on a fresh database of the run's engine; `env` adds settings. */
export async function startServer(env: Record<string, string> = {}) {
  const cwd = mkdtempSync(join(scratch, 'run-'));
  const database = TEST_ENGINE === 'postgres' ? await freshPostgresDatabase() : join(cwd, 'keygate.db');
  const process_ = Bun.spawn([binary()], {
    cwd,
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      HOST: '127.0.0.1',
      DATABASE_URL: database,
      JWT_SECRET: SECRET,
      USAGE_FLUSH_SECONDS: '1',
      ...env,
    },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const reader = (process_.stdout as ReadableStream<Uint8Array>).getReader();
  const start = await readStartLine(reader);
  const logged: string[] = [];
  // Keep reading, so a full pipe never stalls the server; the lines are kept for the log checks.
  void (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      logged.push(new TextDecoder().decode(value));
    }
  })();
  const base = start.url.replace(/\/$/, '');
  const jwt = createJwtAuthority({ secret: SECRET, clock: Date.now });
  const token = (sub: number | string, options: { level?: number; scope?: string } = {}) =>
    jwt.sign({ sub, level: options.level, scope: options.scope, ttlSeconds: 3600 });

  async function api(method: string, path: string, headers: Record<string, string>, body?: unknown) {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, json: text === '' ? undefined : JSON.parse(text) };
  }

  return {
    base,
    token,
    api,
    /** What the server wrote on stdout so far. */
    log: () => logged.join(''),
    /** A user's one-time link, through the host application's route (a token of that user). */
    async userLink(sub: number, level?: number): Promise<string> {
      const answer = await api('POST', '/apikeys/sessions/jwt', {
        authorization: `Bearer ${await token(sub, { level })}`,
      });
      if (answer.status !== 201) throw new Error(`link: ${answer.status}`);
      return answer.json.url;
    },
    async operatorLink(): Promise<string> {
      const admin = { authorization: `Bearer ${await token('ops', { scope: 'keygate:admin' })}` };
      const answer = await api('POST', '/admin/sessions', admin, { operator: true });
      if (answer.status !== 201) throw new Error(`operator link: ${answer.status}`);
      return answer.json.url;
    },
    /** Creates a key for `sub` through the API (a token of that user). */
    async createKey(sub: number, body: Record<string, unknown>) {
      const answer = await api('POST', '/apikeys/jwt', { authorization: `Bearer ${await token(sub)}` }, body);
      if (answer.status !== 201) throw new Error(`create: ${answer.status} ${JSON.stringify(answer.json)}`);
      return answer.json.apikey as { key: string; secret: string; name: string };
    },
    /** Waits until the key's usage (written every USAGE_FLUSH_SECONDS) counts `valid` and `denied`. */
    async usageWritten(sub: number, key: string, counts: { valid: number; denied?: number }) {
      const headers = { authorization: `Bearer ${await token(sub)}` };
      for (const deadline = Date.now() + 15_000; Date.now() < deadline; await Bun.sleep(100)) {
        const answer = await api('GET', `/apikeys/${key}/usage/jwt`, headers);
        const usage = (answer.json?.usage ?? []) as Array<{ valid: number; denied: number }>;
        const valid = usage.reduce((sum, bucket) => sum + bucket.valid, 0);
        const denied = usage.reduce((sum, bucket) => sum + bucket.denied, 0);
        if (valid === counts.valid && denied === (counts.denied ?? 0)) return;
      }
      throw new Error(`the usage of ${key} was not written within 15 s`);
    },
    async verify(key: string, secret: string) {
      return (await api('POST', '/apikeys/verify', {}, { key, secret })).json as {
        valid: boolean;
        code: string;
      };
    },
    async stop() {
      process_.kill('SIGTERM');
      await process_.exited;
    },
  };
}

export type Watched = {
  page: Page;
  context: BrowserContext;
  /** Every URL the page asked for. */
  requests: string[];
  consoleErrors: string[];
  /** CSP violations the page reported (securitypolicyviolation events). */
  violations(): Promise<string[]>;
  close(): Promise<void>;
};

/** A page in a fresh context (no cookies), watched for requests, console errors and CSP violations. */
export async function watchedPage(
  options: { width?: number; height?: number; colorScheme?: 'light' | 'dark' } = {},
): Promise<Watched> {
  const context = await (await theBrowser()).newContext({
    viewport: { width: options.width ?? 1280, height: options.height ?? 800 },
    colorScheme: options.colorScheme ?? 'light',
  });
  const page = await context.newPage();
  const requests: string[] = [];
  const consoleErrors: string[] = [];
  page.on('request', (request) => requests.push(request.url()));
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => consoleErrors.push(error.message));
  // Runs before the page's own script; a string, for these tests are type-checked without the DOM.
  await page.addInitScript(`
    window.__violations = [];
    document.addEventListener('securitypolicyviolation', (event) =>
      window.__violations.push(event.violatedDirective + ' ' + event.blockedURI));
  `);
  return {
    page,
    context,
    requests,
    consoleErrors,
    violations: () => page.evaluate<string[]>('window.__violations ?? []').catch(() => []),
    close: () => context.close(),
  };
}

/** The console's origin: what every request of the page must stay within. */
export function originOf(base: string): string {
  return new URL(base).origin;
}

/** The browser's own console line for an answer with an error status (the page shows keygate's sentence). */
export const REFUSED = /Failed to load resource: the server responded with a status of 40[0-9]/;

/** Nothing left keygate's origin, no CSP violation, no console error (but those `allowed`). */
export async function expectClean(watched: Watched, base: string, allowed: RegExp[] = []): Promise<void> {
  const origin = originOf(base);
  expect(watched.requests.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith('data:'))).toEqual(
    [],
  );
  expect(await watched.violations()).toEqual([]);
  expect(watched.consoleErrors.filter((text) => !allowed.some((pattern) => pattern.test(text)))).toEqual([]);
}

/** Waits (up to `ms`) until the locator's text is `expected` (or matches it); fails with what it was. */
export async function expectText(
  locator: { textContent(options?: { timeout?: number }): Promise<string | null> },
  expected: string | RegExp,
  ms = 5000,
): Promise<void> {
  const deadline = Date.now() + ms;
  let text: string | null = null;
  for (;;) {
    text = await locator.textContent({ timeout: ms }).catch(() => null);
    const matched = typeof expected === 'string' ? text === expected : text !== null && expected.test(text);
    if (matched) return;
    if (Date.now() > deadline)
      throw new Error(`expected text ${String(expected)}, got ${JSON.stringify(text)}`);
    await Bun.sleep(50);
  }
}

/**
 * The controls on the page that have no accessible name: a button without text or aria-label, a
 * field without a label or aria-label (what a screen reader would announce as just "button").
 */
export function unnamedControls(page: Page): Promise<string[]> {
  return page.evaluate<string[]>(`
    [...document.querySelectorAll('button, input, select, textarea, a[href]')]
      .filter((element) => element.type !== 'hidden')
      .filter((element) => {
        const label = element.getAttribute('aria-label') || element.getAttribute('aria-labelledby');
        if (label) return false;
        if (element.tagName === 'BUTTON' || element.tagName === 'A') return element.textContent.trim() === '';
        return element.labels === null || element.labels.length === 0;
      })
      .map((element) => element.outerHTML.slice(0, 120))
  `);
}
