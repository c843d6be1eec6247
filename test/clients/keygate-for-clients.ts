// What the client tests run against: the real dist/keygate (built once if missing) on a free port, a
// token of user 42 for it, and stub keygates for what the real one will not do on demand: stopped
// (a port nothing listens on), answering 5xx, too slow, answering a code no client knows.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { mintToken } from '../../examples/integrate/mint-token';
import { buildBinary, readStartLine } from '../support/binary';

const ROOT = join(import.meta.dir, '..', '..');
const BINARY = join(ROOT, 'dist', 'keygate');
const JWT_SECRET = 'client-tests-secret-at-least-32-bytes-long';

export type KeygatesForClients = {
  url: string;
  token: string;
  stubs: { stopped: string; '5xx': string; slow: string; 'unknown-code': string };
  stop(): Promise<void>;
};

export async function startKeygatesForClients(): Promise<KeygatesForClients> {
  if (!existsSync(BINARY)) buildBinary(BINARY);
  const server = Bun.spawn([BINARY, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: '0',
      DATABASE_URL: ':memory:',
      JWT_SECRET,
    },
    stdout: 'pipe',
    stderr: 'inherit',
  });
  const log = (server.stdout as ReadableStream<Uint8Array>).getReader();
  const { url } = await readStartLine(log);
  // The request log is read and dropped, so a full pipe never stalls keygate.
  void (async () => {
    while (!(await log.read()).done) {}
  })();
  const base = url.replace(/\/$/, '');
  const token = await mintToken(42, JWT_SECRET, 5);

  const stub = (answer: (request: Request) => Response | Promise<Response>) =>
    Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: answer });
  const failing = stub(() =>
    Response.json({ result: 'error', error: 'Database unavailable.' }, { status: 500 }),
  );
  const slow = stub(() => Bun.sleep(2000).then(() => new Response('late')));
  const unknown = stub(() =>
    Response.json({
      result: 'success',
      valid: true,
      code: 'A_CODE_FROM_THE_FUTURE',
      principal: {
        type: 'key',
        key: 'kg_x',
        userId: 42,
        level: 3,
        name: 'x',
        expiresAt: new Date().toISOString(),
      },
    }),
  );
  const closed = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response() });
  const stoppedUrl = `http://127.0.0.1:${closed.port}`;
  closed.stop(true);

  return {
    url: base,
    token,
    stubs: {
      stopped: stoppedUrl,
      '5xx': `http://127.0.0.1:${failing.port}`,
      slow: `http://127.0.0.1:${slow.port}`,
      'unknown-code': `http://127.0.0.1:${unknown.port}`,
    },
    async stop() {
      for (const s of [failing, slow, unknown]) s.stop(true);
      server.kill('SIGTERM');
      await server.exited;
    },
  };
}
