// Idle keep-alive connections: closed after IDLE_TIMEOUT_SECONDS, which every response advertises
// (issue 13, item 6). Over a real socket: app.handle has no connections.
import { afterEach, expect, it } from 'bun:test';
import type { RunningServer } from '../../src/serve';
import { startSocketServer } from '../support/socket-server';

let server: RunningServer | undefined;
afterEach(() => server?.stop());

async function start(env: Record<string, string>): Promise<RunningServer> {
  server = await startSocketServer(env);
  return server;
}

it('advertises the default Keep-Alive timeout of 75 s on success and error answers', async () => {
  const { url } = await start({});
  for (const path of ['health', 'missing', 'apikeys/jwt']) {
    const response = await fetch(new URL(path, url), { method: path === 'apikeys/jwt' ? 'POST' : 'GET' });
    await response.text();
    expect(response.headers.get('keep-alive')).toBe('timeout=75');
  }
});

it('advertises IDLE_TIMEOUT_SECONDS and closes a connection left idle after a request', async () => {
  const { url } = await start({ IDLE_TIMEOUT_SECONDS: '1' });
  let received = '';
  const closedByServer = await new Promise<boolean>((resolve, reject) => {
    Bun.connect({
      hostname: url.hostname,
      port: Number(url.port),
      socket: {
        open(socket) {
          socket.write(`GET /health HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
        },
        data(_socket, chunk) {
          received += chunk.toString();
        },
        // The client never closes: only the server's idle timer can end this connection.
        close() {
          resolve(true);
        },
        error(_socket, error) {
          reject(error);
        },
      },
    }).catch(reject);
  });
  expect(closedByServer).toBe(true);
  expect(received).toStartWith('HTTP/1.1 200');
  expect(received.toLowerCase()).toContain('keep-alive: timeout=1\r\n');
}, 20_000);

it('does not advertise keep-alive on an answer that closes the connection (413)', async () => {
  const { url } = await start({});
  const response = await fetch(new URL('apikeys/jwt', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: new Uint8Array(17 * 1024),
  });
  await response.text();
  expect(response.status).toBe(413);
  expect(response.headers.get('keep-alive')).toBeNull();
});
