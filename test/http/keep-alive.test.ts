// Idle keep-alive connections: closed after IDLE_TIMEOUT_SECONDS, which every response advertises
// (Keep-Alive: timeout=N). Over a real socket: app.handle has no connections.
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
  // The verification routes too, which the edge answers before Elysia: a 200 and a 401.
  for (const [method, path] of [
    ['GET', 'health'],
    ['GET', 'missing'],
    ['POST', 'apikeys/jwt'],
    ['POST', 'apikeys/verify'],
    ['GET', 'forward-auth'],
  ]) {
    const response = await fetch(new URL(path as string, url), {
      method,
      headers: { 'content-type': 'application/json' },
      body: method === 'POST' ? JSON.stringify({ token: 'not.a.token' }) : undefined,
    });
    await response.text();
    expect([path, response.status, response.headers.get('keep-alive')]).toEqual([
      path,
      { health: 200, missing: 404, 'apikeys/jwt': 401, 'apikeys/verify': 200, 'forward-auth': 401 }[
        path as string
      ],
      'timeout=75',
    ]);
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
  for (const path of ['apikeys/jwt', 'apikeys/verify']) {
    const response = await fetch(new URL(path, url), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new Uint8Array(17 * 1024),
    });
    await response.text();
    expect([path, response.status, response.headers.get('keep-alive')]).toEqual([path, 413, null]);
  }
});
