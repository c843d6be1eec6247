// docs/reverse-proxies.md shows the nginx and Caddy configurations that scripts/ci/proxy-smoke.sh runs
// against the real servers: the files in examples/proxies/, verbatim, so the two cannot drift apart.
import { describe, expect, it } from 'bun:test';
import { join } from 'node:path';

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

  it('the smoke script substitutes every placeholder the configurations use', async () => {
    const script = await read('scripts/ci/proxy-smoke.sh');
    for (const path of ['examples/proxies/nginx.conf', 'examples/proxies/Caddyfile']) {
      const placeholders = new Set((await read(path)).match(/@[A-Z]+@/g));
      expect(placeholders.size).toBeGreaterThan(0);
      for (const placeholder of placeholders) expect(script).toMatch(new RegExp(`s([/|])${placeholder}\\1`));
    }
  });
});
