// docs/reverse-proxies.md shows the nginx and Caddy configurations that scripts/ci/proxy-smoke.sh runs
// against the real servers: the files in examples/proxies/, verbatim, so the two cannot drift apart.
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { join } from 'node:path';
import { type TestKeygate, type TestResponse, testKeygate } from '../support/keygate';

const root = join(import.meta.dir, '..', '..');
const read = (path: string) => Bun.file(join(root, path)).text();

describe('docs/reverse-proxies.md and the tested proxy configurations', () => {
  it.each([
    ['examples/proxies/nginx.conf', 'nginx'],
    ['examples/proxies/Caddyfile', 'caddyfile'],
  ])('%s appears verbatim in a %s block of docs/reverse-proxies.md', async (path, language) => {
    const [doc, config] = await Promise.all([read('docs/reverse-proxies.md'), read(path)]);
    expect(doc).toContain(`\`\`\`${language}\n${config}\`\`\`\n`);
  });

  it("the Caddyfile turns Caddy's admin API off and offers bind 127.0.0.1, which the smoke script turns on", async () => {
    const [caddyfile, script] = await Promise.all([
      read('examples/proxies/Caddyfile'),
      read('scripts/ci/proxy-smoke.sh'),
    ]);
    // The global options block comes first, before the site.
    expect(caddyfile).toMatch(/^(#.*\n)*\{\n(\t#.*\n)*\tadmin off\n\}\n/);
    expect(caddyfile).toContain('\n\t# bind 127.0.0.1\n');
    expect(script).toContain("-e 's/^\\t# bind 127\\.0\\.0\\.1$/\\tbind 127.0.0.1/'");
  });

  it('the smoke script substitutes every placeholder the configurations use', async () => {
    const script = await read('scripts/ci/proxy-smoke.sh');
    for (const path of ['examples/proxies/nginx.conf', 'examples/proxies/Caddyfile']) {
      const placeholders = new Set((await read(path)).match(/@[A-Z]+@/g));
      expect(placeholders.size).toBeGreaterThan(0);
      for (const placeholder of placeholders) expect(script).toMatch(new RegExp(`s([/|])${placeholder}\\1`));
    }
  });
});

// What keygate's forward-auth answers a key under a rate limit (200, then 429) and a key whose credits
// are used up (429), and what each proxy configuration does with it. The smoke script proves the
// nginx and Caddy ones against the real servers; these tests tie every configuration to keygate's
// actual header names and error bodies, so renaming one cannot leave a configuration behind.
describe('the proxy configurations and forward-auth answers for rate limits and credits', () => {
  let k: TestKeygate;
  let allowed: TestResponse;
  let rateLimited: TestResponse;
  let usageExceeded: TestResponse;
  beforeAll(async () => {
    k = await testKeygate();
    const owner = await k.bearer(7);
    const create = async (settings: Record<string, unknown>) => {
      const created = await k.req('POST', '/apikeys/jwt', {
        headers: owner,
        body: { name: 'proxied', level: 3, expiresIn: 3600, ...settings },
      });
      expect(created.status).toBe(201);
      const { key, secret } = created.json.apikey;
      return () => k.req('GET', '/forward-auth', { headers: k.basic(key, secret) });
    };
    const limited = await create({ ratelimit: { limit: 1, duration: 60 } });
    allowed = await limited();
    rateLimited = await limited();
    usageExceeded = await (await create({ credits: { remaining: 0 } }))();
  });
  afterAll(() => k.close());

  /** Header names keygate sends on an allowed request for a limited key, and on a 429. */
  const ALLOWED = ['ratelimit-policy', 'ratelimit'];
  const REFUSED = ['retry-after', 'ratelimit-policy', 'ratelimit', 'x-keygate-code'];

  it('forward-auth sends these headers and codes (what the configurations hand on)', () => {
    expect(allowed.status).toBe(200);
    for (const name of ALLOWED) expect(allowed.headers.get(name)).toBeString();
    expect(rateLimited.status).toBe(429);
    for (const name of REFUSED) expect(rateLimited.headers.get(name)).toBeString();
    expect(rateLimited.headers.get('x-keygate-code')).toBe('RATE_LIMITED');
    expect(usageExceeded.status).toBe(429);
    expect(usageExceeded.headers.get('x-keygate-code')).toBe('USAGE_EXCEEDED');
  });

  /** nginx's variable for a header of keygate's answer: `auth_request_set $var $upstream_http_<name>`. */
  const nginxVariable = (nginx: string, name: string) => {
    const upstream = `$upstream_http_${name.replaceAll('-', '_')}`;
    const found = nginx.match(new RegExp(`auth_request_set (\\$\\w+) ${upstream.replace('$', '\\$')};`));
    if (!found?.[1]) throw new Error(`nginx.conf captures no ${upstream}`);
    return found[1];
  };
  const addHeader = (name: string, variable: string) =>
    new RegExp(`add_header ${name} ${variable.replace('$', '\\$')} always;`, 'i');

  it('nginx adds an allowed key’s rate-limit headers at server level, for every location without add_header', async () => {
    const nginx = await read('examples/proxies/nginx.conf');
    const serverLevel = nginx.slice(nginx.indexOf('server {'), nginx.indexOf('    location '));
    for (const name of ALLOWED) expect(serverLevel).toMatch(addHeader(name, nginxVariable(nginx, name)));
    // add_header is inherited only by a location with none of its own.
    const locations = nginx.split(/\n {4}location /).slice(1);
    for (const location of locations.filter((body) => body.includes('proxy_pass http://@APP@'))) {
      expect(location).not.toContain('add_header');
    }
  });

  it('nginx’s error page turns each of keygate’s 429s back into a 429 with its headers and body', async () => {
    const nginx = await read('examples/proxies/nginx.conf');
    expect(nginx).toContain('error_page 500 = @keygate_refused;');
    const refused = nginx.slice(nginx.indexOf('location @keygate_refused {'));
    for (const name of REFUSED) expect(refused).toMatch(addHeader(name, nginxVariable(nginx, name)));
    const code = nginxVariable(nginx, 'x-keygate-code');
    const retryAfter = nginxVariable(nginx, 'retry-after');
    for (const answer of [rateLimited, usageExceeded]) {
      const keygateCode = answer.headers.get('x-keygate-code');
      const branch = refused.match(
        new RegExp(`if \\(\\${code} = ${keygateCode}\\) \\{\\s*return 429 '((?:[^'\\\\]|\\\\.)*)';`),
      );
      expect(branch?.[1]).toBeString();
      // nginx's quoted string: \' \" \\ and \n are escapes; the variable is keygate's Retry-After.
      const body = (branch?.[1] ?? '')
        .replace(/\\(.)/g, (_, char: string) => (char === 'n' ? '\n' : char))
        .replaceAll(retryAfter, answer.headers.get('retry-after') ?? '<none>');
      expect(JSON.parse(body)).toEqual(answer.json);
    }
  });

  it('Caddy copies an allowed key’s rate-limit headers, puts them on the answer and drops a client’s own', async () => {
    const caddy = await read('examples/proxies/Caddyfile');
    const copied = [...caddy.matchAll(/copy_headers (.+)/g)].map((line) => line[1]?.toLowerCase().split(' '));
    expect(copied.length).toBeGreaterThan(0);
    for (const names of copied) expect(names).toEqual(expect.arrayContaining(ALLOWED));
    for (const name of ALLOWED) {
      expect(caddy.toLowerCase()).toContain(`header @ratelimited ${name} {http.request.header.${name}}`);
    }
    const route = caddy.slice(caddy.indexOf('route {'));
    const asked = route.indexOf('forward_auth');
    // Dropped before asking keygate (a client's own) and after (keygate's, before the application).
    expect(route.lastIndexOf('request_header -RateLimit*', asked)).toBeGreaterThan(-1);
    expect(route.indexOf('request_header -RateLimit*', asked)).toBeGreaterThan(asked);
  });

  /** The YAML block under a heading of docs/reverse-proxies.md, parsed. */
  async function yamlUnder(heading: string) {
    const doc = await read('docs/reverse-proxies.md');
    const section = doc.slice(doc.indexOf(heading));
    const block = section.match(/```yaml\n([\s\S]*?)```\n/)?.[1];
    if (block === undefined) throw new Error(`no yaml block under ${heading}`);
    // biome-ignore lint/suspicious/noExplicitAny: the test walks whatever the documented YAML holds.
    return Bun.YAML.parse(block) as any;
  }
  const patterns = (list: { patterns: Array<{ exact?: string }> }) => list.patterns.map((p) => p.exact);

  it('Envoy (untested here) passes the 429’s headers and an allowed key’s rate-limit headers to the client', async () => {
    const filters = (await yamlUnder('## Envoy')).http_filters;
    const authz = filters.find((filter: { name: string }) => filter.name === 'envoy.filters.http.ext_authz');
    const response = authz.typed_config.http_service.authorization_response;
    expect(patterns(response.allowed_client_headers)).toEqual(expect.arrayContaining(REFUSED));
    expect(patterns(response.allowed_client_headers_on_success)).toEqual(expect.arrayContaining(ALLOWED));
  });

  it('Traefik (untested here) hands an allowed key’s rate-limit headers to the application', async () => {
    const middlewares = (await yamlUnder('## Traefik')).http.middlewares;
    for (const name of ['keygate', 'keygate-admin']) {
      const copied = middlewares[name].forwardAuth.authResponseHeaders.map((h: string) => h.toLowerCase());
      expect(copied).toEqual(expect.arrayContaining(ALLOWED));
    }
  });
});

describe('docs/rate-limits.md, behind a reverse proxy', () => {
  it.each([
    ['nginx', 'examples/proxies/nginx.conf'],
    ['caddyfile', 'examples/proxies/Caddyfile'],
  ])('every line of its %s excerpt is a line of %s, in the same order', async (language, path) => {
    const [doc, config] = await Promise.all([read('docs/rate-limits.md'), read(path)]);
    const section = doc.slice(doc.indexOf('## Behind a reverse proxy'));
    const excerpt = section.match(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\`\\n`))?.[1];
    expect(excerpt).toBeString();
    // The excerpt's own comments say where the lines go; every other line is the file's, verbatim.
    const lines = (excerpt ?? '')
      .split('\n')
      .filter((line) => line.trim() !== '' && !line.trim().startsWith('#'));
    expect(lines.length).toBeGreaterThan(3);
    const fileLines = config.split('\n');
    let at = 0;
    for (const line of lines) {
      const found = fileLines.indexOf(line, at);
      expect({ line, found: found >= 0 }).toEqual({ line, found: true });
      at = found + 1;
    }
  });
});
