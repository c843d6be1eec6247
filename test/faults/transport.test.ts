// What only a real listening server shows: bodies over Bun's transport limit, and the headers Bun adds.
import { afterAll, beforeAll, expect, it } from 'bun:test';
import type { RunningServer } from '../../src/serve';
import { socketBearer, startSocketServer } from '../support/socket-server';

let server: RunningServer;
let bearer: string;
beforeAll(async () => {
  server = await startSocketServer();
  bearer = await socketBearer(1);
});
afterAll(() => server.stop());

const url = (path: string) => new URL(path.slice(1), server.url).href;

it.each([
  ['just over 16 KiB', 16 * 1024 + 1],
  ['over a mebibyte', 2 * 1024 * 1024],
])('a body %s is a JSON 413 that closes the connection', async (_, size) => {
  const response = await fetch(url('/apikeys/jwt'), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: new Uint8Array(size),
  });
  expect(response.status).toBe(413);
  expect(response.headers.get('content-type')).toBe('application/json');
  expect(response.headers.get('x-content-type-options')).toBe('nosniff');
  expect(response.headers.get('connection')).toBe('close');
  expect(await response.json()).toEqual({ result: 'error', error: expect.stringContaining('16384') });
});

it('a chunked body that grows past 16 KiB is a JSON 413 that closes the connection', async () => {
  const chunks = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let i = 0; i < 40; i++) controller.enqueue(new Uint8Array(1024).fill(32));
      controller.close();
    },
  });
  const response = await fetch(url('/apikeys/jwt'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: bearer },
    body: chunks,
  });
  expect(response.status).toBe(413);
  expect(response.headers.get('content-type')).toBe('application/json');
  expect(response.headers.get('connection')).toBe('close');
  expect(await response.json()).toEqual({ result: 'error', error: expect.stringContaining('16384') });
});

it('names no framework or server on the wire, and sends nosniff on every answer', async () => {
  for (const [method, path] of [
    ['GET', '/health'],
    ['GET', '/missing'],
    ['POST', '/apikeys/jwt'],
    ['DELETE', '/apikeys/kg_0000000000000000000000/key'],
    ['GET', '/openapi'],
  ] as const) {
    const response = await fetch(url(path), { method });
    await response.arrayBuffer();
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('server')).toBeNull();
    expect(response.headers.get('x-powered-by')).toBeNull();
    for (const [, value] of response.headers) expect(value.toLowerCase()).not.toMatch(/elysia|bun/);
  }
});

/** Sends raw bytes and returns the status line and body of the answer. */
async function rawRequest(bytes: string): Promise<{ statusLine: string; body: string }> {
  let received = '';
  const { promise: closed, resolve } = Promise.withResolvers<void>();
  const socket = await Bun.connect({
    hostname: '127.0.0.1',
    port: Number(server.url.port),
    socket: {
      data(_socket, chunk) {
        received += new TextDecoder().decode(chunk);
      },
      close: () => resolve(),
      error: () => resolve(),
    },
  });
  socket.write(bytes);
  await Promise.race([closed, Bun.sleep(2000)]);
  socket.end();
  const [head = '', body = ''] = received.split('\r\n\r\n');
  return { statusLine: head.split('\r\n')[0] ?? '', body };
}

it.each([
  ['HTTP/1.0 without Host', 'GET /health HTTP/1.0\r\n\r\n', 200],
  ['HTTP/1.1 with an empty Host', 'GET /health HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n', 200],
  ['HTTP/1.0 create without Host', 'POST /apikeys/jwt HTTP/1.0\r\nContent-Length: 0\r\n\r\n', 401],
])('routes a request that carries no host: %s', async (_, bytes, status) => {
  const { statusLine, body } = await rawRequest(bytes);
  expect(statusLine).toStartWith(`HTTP/1.1 ${status} `);
  expect(body).not.toContain('There is no');
});
