// The API reference page at /openapi: Swagger UI from files embedded in the binary (no CDN, nothing
// fetched from a third party), under a Content-Security-Policy that allows keygate's own origin only.
import { Elysia } from 'elysia';
import cssPath from 'swagger-ui-dist/swagger-ui.css' with { type: 'file' };
import bundlePath from 'swagger-ui-dist/swagger-ui-bundle.js' with { type: 'file' };

// Relative URLs, so the page works under any BASE_PATH: from /auth/openapi, "openapi/json" is
// /auth/openapi/json. validatorUrl null: Swagger UI would otherwise send the document to its
// public validator for a badge. No "Try it out": the page documents, it does not hold credentials.
const START_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: 'openapi/json',
    dom_id: '#reference',
    deepLinking: true,
    validatorUrl: null,
    supportedSubmitMethods: [],
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
  });
});
`;

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>keygate API reference</title>
    <link rel="stylesheet" href="openapi/swagger-ui.css">
  </head>
  <body>
    <div id="reference"></div>
    <noscript>The reference needs JavaScript; the OpenAPI document itself is at openapi/json.</noscript>
    <script src="openapi/swagger-ui-bundle.js"></script>
    <script src="openapi/start.js"></script>
  </body>
</html>
`;

/** Only keygate's origin; data: images are the icons Swagger UI inlines in its stylesheet. */
export const REFERENCE_PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

// The assets change only with the binary; an hour of caching spares reloads without outliving an upgrade long.
const ASSET_CACHE = 'public, max-age=3600';
const hidden = { detail: { hide: true } };

export function referencePage() {
  return new Elysia({ name: 'reference-page' })
    .get(
      '/openapi',
      () =>
        new Response(PAGE, {
          headers: {
            'content-type': 'text/html; charset=utf-8',
            'content-security-policy': REFERENCE_PAGE_CSP,
            'cache-control': 'no-cache',
          },
        }),
      hidden,
    )
    .get('/openapi/swagger-ui-bundle.js', () => asset(bundlePath, 'text/javascript; charset=utf-8'), hidden)
    .get('/openapi/swagger-ui.css', () => asset(cssPath, 'text/css; charset=utf-8'), hidden)
    .get(
      '/openapi/start.js',
      () =>
        new Response(START_SCRIPT, {
          headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': ASSET_CACHE },
        }),
      hidden,
    );
}

function asset(path: string, contentType: string): Response {
  return new Response(Bun.file(path), {
    headers: { 'content-type': contentType, 'cache-control': ASSET_CACHE },
  });
}
