// Idle keep-alive connections over a real socket: IDLE_TIMEOUT_SECONDS is applied and advertised
// (`Keep-Alive: timeout=N`), so a proxy can stop reusing a connection before keygate closes it.
import { afterAll, expect, it } from 'bun:test';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/log';
import { type RunningServer, serve } from '../../src/serve';

const servers: RunningServer[] = [];
afterAll(() => Promise.all(servers.map((server) => server.stop())));

function start(env: Record<string, string> = {}): RunningServer {
  const config = loadConfig({ DATABASE_URL: ':memory:', HOST: '127.0.0.1', PORT: '0', ...env });
  const server = serve(config, {
    jwtSecret: 'keep-alive-tests-secret-at-least-32-bytes',
    logger: createLogger('silent'),
  });
  servers.push(server);
  return server;
}

/** Sends one request on a fresh connection; `closed` settles when the server closes it. */
async function openAndAsk(server: RunningServer, request: string) {
  let received = '';
  const { promise: answered, resolve: answer } = Promise.withResolvers<string>();
  const { promise: closed, resolve: close } = Promise.withResolvers<void>();
  await Bun.connect({
    hostname: '127.0.0.1',
    port: Number(server.url.port),
    socket: {
      data(_socket, chunk) {
        received += new TextDecoder().decode(chunk);
        if (received.includes('\r\n\r\n')) answer(received.slice(0, received.indexOf('\r\n\r\n')));
      },
      close: () => close(),
      error: () => close(),
    },
  }).then((socket) => socket.write(request));
  return { head: (await answered).toLowerCase(), closed };
}

const HEALTH = 'GET /health HTTP/1.1\r\nHost: keygate.test\r\n\r\n';

it('advertises the default idle timeout, 75 s, on every kept-alive answer', async () => {
  const server = start();
  for (const request of [HEALTH, 'GET /missing HTTP/1.1\r\nHost: keygate.test\r\n\r\n']) {
    const { head } = await openAndAsk(server, request);
    expect(head).toContain('\r\nkeep-alive: timeout=75');
  }
});

it('a response that closes the connection advertises no keep-alive', async () => {
  const server = start();
  const { head, closed } = await openAndAsk(
    server,
    'POST /apikeys/jwt HTTP/1.1\r\nHost: keygate.test\r\nContent-Type: application/json\r\nContent-Length: 99999\r\n\r\n',
  );
  expect(head).toStartWith('http/1.1 413');
  expect(head).toContain('\r\nconnection: close');
  expect(head).not.toContain('keep-alive');
  await closed;
});

it('IDLE_TIMEOUT_SECONDS=1: advertised, and the server closes the idle connection by itself', async () => {
  const server = start({ IDLE_TIMEOUT_SECONDS: '1' });
  const { head, closed } = await openAndAsk(server, HEALTH);
  expect(head).toStartWith('http/1.1 200');
  expect(head).toContain('\r\nkeep-alive: timeout=1');
  // Far below the default 75 s: only the setting can close it before the test's own timeout.
  await closed;
}, 20_000);
