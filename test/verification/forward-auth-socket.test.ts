// Forward-auth over a real socket (127.0.0.1, port 0): what app.handle cannot show, namely methods as
// Bun's HTTP parser takes them, HEAD, and a declared body that is never sent nor read.
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { connect } from 'node:net';
import type { RunningServer } from '../../src/serve';
import { socketBearer, startSocketServer } from '../support/socket-server';

let server: RunningServer;
let authorization: string;
beforeAll(async () => {
  server = await startSocketServer();
  const created = await fetch(new URL('apikeys/jwt', server.url), {
    method: 'POST',
    headers: {
      authorization: await socketBearer(42),
      'content-type': 'application/json',
    },
    body: JSON.stringify({ name: 'proxy', level: 3, expiresIn: 600 }),
  });
  const { apikey } = (await created.json()) as { apikey: { key: string; secret: string } };
  authorization = `Basic ${Buffer.from(`${apikey.key}:${apikey.secret}`).toString('base64')}`;
});
afterAll(() => server.stop());

type RawResponse = { status: number; headers: Record<string, string>; body: string };

/** Writes `head` (and nothing after it) and reads one response: headers plus Content-Length bytes. */
function exchange(head: string, { bodyExpected = true } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(server.url.port), '127.0.0.1');
    let received = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete response; got ${JSON.stringify(received.toString())}`));
    }, 5000);
    socket.on('error', reject);
    // Closed before a whole response arrived (after one, the promise is already settled).
    socket.on('close', () => {
      clearTimeout(timer);
      reject(new Error(`closed without a complete response; got ${JSON.stringify(received.toString())}`));
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const text = received.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end === -1) return;
      const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
      const headers = Object.fromEntries(
        lines.map((line) => {
          const colon = line.indexOf(':');
          return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()];
        }),
      );
      const length = bodyExpected ? Number(headers['content-length'] ?? 0) : 0;
      if (received.length - (end + 4) < length) return;
      clearTimeout(timer);
      socket.destroy();
      resolve({
        status: Number(statusLine.split(' ')[1]),
        headers,
        body: received.subarray(end + 4, end + 4 + length).toString(),
      });
    });
    socket.write(head);
  });
}

const request = (method: string, path: string, extra = '') =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${authorization}\r\n${extra}\r\n`;

describe('forward-auth over a socket', () => {
  it.each([
    'GET',
    'POST',
    'PUT',
    'DELETE',
    'PATCH',
    'OPTIONS',
    'PROPFIND',
    'MKCOL',
    'LOCK',
    'PURGE',
    'QUERY',
    'SEARCH',
    'REPORT',
  ])('allows %s', async (method) => {
    const response = await exchange(request(method, '/forward-auth/app?minLevel=3'));
    expect(response.status).toBe(200);
    expect(response.headers['x-keygate-user-id']).toBe('42');
    expect(JSON.parse(response.body).principal.level).toBe(3);
  });

  it('never sees a method Bun’s HTTP parser does not know: Bun closes the connection (docs/decisions.md, choice 25)', async () => {
    await expect(exchange(request('FOO', '/forward-auth'))).rejects.toThrow();
  });

  it('answers HEAD with the status and identity headers and no body', async () => {
    const response = await exchange(request('HEAD', '/forward-auth'), { bodyExpected: false });
    expect(response.status).toBe(200);
    expect(response.headers['x-keygate-auth']).toBe('key');
    expect(response.headers['cache-control']).toBe('no-store');
    expect(response.body).toBe('');
  });

  it('answers without reading a huge declared body that never comes', async () => {
    const response = await exchange(
      request('POST', '/forward-auth', 'Content-Type: application/json\r\nContent-Length: 1073741824\r\n'),
    );
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body).principal.userId).toBe(42);
  });

  it('denies without credentials: 401 naming Bearer and Basic, even with a declared body', async () => {
    const response = await exchange(
      'PUT /forward-auth HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n',
    );
    expect(response.status).toBe(401);
    expect(response.headers['www-authenticate']).toContain('Bearer');
    expect(response.headers['www-authenticate']).toContain('Basic');
    expect(JSON.parse(response.body).result).toBe('error');
  });

  it('still refuses a declared body over 16 KiB elsewhere (413)', async () => {
    const response = await exchange(
      request('POST', '/apikeys/key', 'Content-Type: application/json\r\nContent-Length: 1000000\r\n'),
    );
    expect(response.status).toBe(413);
  });
});
