// The console's page and its files: one HTML page (its title put in server-side, escaped), the
// bundled script and stylesheet (console-bundle.macro.ts: inside the binary), and theme.css with
// CONSOLE_ACCENT. Gzipped once at start for browsers that take it. No inline script or style: the CSP
// (consoleSecurityHeaders) allows keygate's own files only.
import { Elysia } from 'elysia';
import { consoleBundle } from './console-bundle.macro' with { type: 'macro' };

const BUNDLE = consoleBundle();

export type ConsolePageOptions = { title: string; accent: string; frameAncestors: string };

/** The CSP of every console answer (page, files and API). */
export function consoleCsp(frameAncestors: string): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    `frame-ancestors ${frameAncestors}`,
    "base-uri 'none'",
    "form-action 'self'",
  ].join('; ');
}

/** The headers every console answer carries, errors included. */
export function consoleSecurityHeaders(frameAncestors: string): Record<string, string> {
  return {
    'content-security-policy': consoleCsp(frameAncestors),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cross-origin-opener-policy': 'same-origin',
    'cross-origin-resource-policy': 'same-origin',
  };
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

// Relative URLs: from …/console, "console/app.js" is …/console/app.js under any BASE_PATH.
function pageHtml(title: string): string {
  const escaped = escapeHtml(title);
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <meta name="color-scheme" content="light dark">
    <title>${escaped}</title>
    <link rel="icon" href="data:,">
    <link rel="stylesheet" href="console/app.css">
    <link rel="stylesheet" href="console/theme.css">
    <script type="module" src="console/app.js"></script>
  </head>
  <body>
    <div id="console" data-title="${escaped}"><p class="loading">Loading…</p></div>
    <noscript>The console needs JavaScript (keygate's own, nothing from elsewhere).</noscript>
  </body>
</html>
`;
}

type Asset = { body: string; gzipped: Uint8Array; type: string };

function asset(body: string, type: string): Asset {
  return { body, gzipped: Bun.gzipSync(body), type };
}

function answer(request: Request, file: Asset): Response {
  const gzip = /\bgzip\b/.test(request.headers.get('accept-encoding') ?? '');
  return new Response(gzip ? file.gzipped : file.body, {
    headers: {
      'content-type': file.type,
      // The files change with the binary only, but a new binary must not be hidden by a cache.
      'cache-control': 'no-cache',
      vary: 'accept-encoding',
      ...(gzip ? { 'content-encoding': 'gzip' } : {}),
    },
  });
}

const hidden = { detail: { hide: true } };

export function consolePage({ title, accent }: ConsolePageOptions) {
  const page = asset(pageHtml(title), 'text/html; charset=utf-8');
  const script = asset(BUNDLE.js, 'text/javascript; charset=utf-8');
  const styles = asset(BUNDLE.css, 'text/css; charset=utf-8');
  const theme = asset(`:root { --accent: ${accent}; }\n`, 'text/css; charset=utf-8');
  return new Elysia({ name: 'console-page' })
    .get('/console', ({ request }) => answer(request, page), hidden)
    .get('/console/app.js', ({ request }) => answer(request, script), hidden)
    .get('/console/app.css', ({ request }) => answer(request, styles), hidden)
    .get('/console/theme.css', ({ request }) => answer(request, theme), hidden);
}
