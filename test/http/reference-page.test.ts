// The reference page at /openapi: served whole by keygate (no third-party origin anywhere), under a
// Content-Security-Policy that allows keygate's own origin only, and working under BASE_PATH.
import { describe, expect, it } from 'bun:test';
import { join } from 'node:path';
import { REFERENCE_PAGE_CSP } from '../../src/http/reference-page';
import { testKeygate } from '../support/keygate';

const swaggerUi = (file: string) =>
  Bun.file(join(import.meta.dir, '..', '..', 'node_modules', 'swagger-ui-dist', file));

describe('GET /openapi (the reference page)', () => {
  it('is HTML whose scripts and styles are all relative URLs on keygate itself', async () => {
    const k = await testKeygate();
    const page = await k.req('GET', '/openapi');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const urls = [...page.text.matchAll(/(?:src|href)="([^"]*)"/g)].map((match) => match[1]);
    expect(urls.sort()).toEqual([
      'openapi/start.js',
      'openapi/swagger-ui-bundle.js',
      'openapi/swagger-ui.css',
    ]);
    expect(page.text).not.toMatch(/https?:\/\//);
    expect(page.text).not.toMatch(/<script>|<style|style=/); // nothing inline: the CSP allows none
  });

  it('carries a Content-Security-Policy that allows only its own origin', async () => {
    const page = await (await testKeygate()).req('GET', '/openapi');
    const policy = page.headers.get('content-security-policy') ?? '';
    expect(policy).toBe(REFERENCE_PAGE_CSP);
    const directives = Object.fromEntries(
      policy.split('; ').map((directive) => [directive.split(' ')[0], directive.split(' ').slice(1)]),
    );
    expect(directives['default-src']).toEqual(["'none'"]);
    expect(directives['script-src']).toEqual(["'self'"]);
    expect(directives['style-src']).toEqual(["'self'"]);
    expect(directives['connect-src']).toEqual(["'self'"]);
    expect(directives['frame-ancestors']).toEqual(["'none'"]);
    expect(policy).not.toMatch(/unsafe|https?:|\*/);
  });

  it('serves the pinned Swagger UI files byte for byte, and a start script that calls no third party', async () => {
    const k = await testKeygate();
    const bundle = await k.req('GET', '/openapi/swagger-ui-bundle.js');
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(bundle.text).toBe(await swaggerUi('swagger-ui-bundle.js').text());
    const css = await k.req('GET', '/openapi/swagger-ui.css');
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect(css.text).toBe(await swaggerUi('swagger-ui.css').text());
    const start = await k.req('GET', '/openapi/start.js');
    expect(start.text).toContain("url: 'openapi/json'");
    expect(start.text).toContain('validatorUrl: null'); // else the document goes to a public validator
    expect(start.text).not.toMatch(/https?:\/\//);
  });

  it('works under BASE_PATH, and its files stay out of the OpenAPI document', async () => {
    const k = await testKeygate({ BASE_PATH: '/auth' });
    expect((await k.req('GET', '/openapi')).status).toBe(200);
    expect((await k.req('GET', '/openapi/start.js')).status).toBe(200);
    const paths = Object.keys((await k.req('GET', '/openapi/json')).json.paths);
    expect(paths.filter((path) => path.startsWith('/openapi'))).toEqual([]);
  });

  it('answers 404 for other files under /openapi', async () => {
    const k = await testKeygate();
    for (const path of [
      '/openapi/index.html',
      '/openapi/../package.json',
      '/openapi/swagger-ui-bundle.js.map',
    ]) {
      const response = await k.req('GET', path);
      expect(response.status).toBe(404);
      expect(response.json.result).toBe('error');
    }
  });
});
