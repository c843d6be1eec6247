// @keygate/client on Node 20+: the package built to JavaScript (its `build` script) and the Express
// example bundled for Node, served by `node` against the real keygate: a pass, a 401, and a 503.
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClient } from '@keygate/client';
import { type KeygatesForClients, startKeygatesForClients } from './keygate-for-clients';

const ROOT = join(import.meta.dir, '..', '..');
// Inside the repository, so that node finds express and @keygate/client in its node_modules.
const OUT = join(ROOT, 'node_modules', '.cache', 'keygate-client-node');

function run(command: string[], cwd = ROOT): void {
  const result = Bun.spawnSync(command, { cwd, stderr: 'pipe' });
  if (result.exitCode !== 0) throw new Error(`${command.join(' ')}: ${result.stderr.toString()}`);
}

/** The Express example under node, guarding with `options`; its base URL and the process. */
async function serveUnderNode(options: object) {
  const child = Bun.spawn(['node', join(OUT, 'serve.mjs'), JSON.stringify(options)], {
    stdout: 'pipe',
    stderr: 'inherit',
  });
  const { value } = await (child.stdout as ReadableStream<Uint8Array>).getReader().read();
  const { port } = JSON.parse(new TextDecoder().decode(value));
  return { url: `http://127.0.0.1:${port}`, child };
}

describe('Express under Node', () => {
  let keygates: KeygatesForClients;
  const children: ReturnType<typeof Bun.spawn>[] = [];
  beforeAll(async () => {
    run(['bun', 'run', 'build'], join(ROOT, 'packages', 'client'));
    mkdirSync(OUT, { recursive: true });
    run([
      'bun',
      'build',
      'examples/integrate/express.ts',
      '--target=node',
      '--packages=external',
      `--outfile=${join(OUT, 'express.mjs')}`,
    ]);
    writeFileSync(
      join(OUT, 'serve.mjs'),
      `import { createApp } from './express.mjs';
const server = createApp(JSON.parse(process.argv[2])).listen(0, '127.0.0.1', () =>
  console.log(JSON.stringify({ port: server.address().port, node: process.version })));
`,
    );
    keygates = await startKeygatesForClients();
  }, 60_000);
  afterAll(async () => {
    for (const child of children) child.kill();
    await keygates?.stop();
  });

  it('passes a valid key with its principal, refuses a missing one (401), and answers 503 with keygate stopped', async () => {
    expect(Bun.spawnSync(['node', '--version']).stdout.toString()).toMatch(/^v(2\d|[3-9]\d)\./);
    const { apikey } = await createClient({ url: keygates.url, token: keygates.token }).createKey({
      body: { name: 'node', level: 2, expiresIn: 60 },
    });
    const real = await serveUnderNode({ url: keygates.url, minLevel: 1 });
    const stopped = await serveUnderNode({ url: keygates.stubs.stopped });
    children.push(real.child, stopped.child);
    const basic = { authorization: `Basic ${btoa(`${apikey.key}:${apikey.secret}`)}` };

    const passed = await fetch(`${real.url}/api/whoami`, { headers: basic });
    expect(passed.status).toBe(200);
    expect(await passed.json()).toMatchObject({ principal: { type: 'key', key: apikey.key, userId: 42 } });
    const missing = await fetch(`${real.url}/api/whoami`);
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toContain('Basic');
    const unavailable = await fetch(`${stopped.url}/api/whoami`, { headers: basic });
    expect(unavailable.status).toBe(503);
    expect(unavailable.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await unavailable.json()).toEqual({ result: 'error', error: expect.any(String) });
  }, 30_000);
});
