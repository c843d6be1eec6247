// Several HTTP/1.1 requests in one TCP write: every one is answered, in order (issue 13, item 1).
// Only a real socket shows this; app.handle never sees how Bun parses a connection.
import { afterAll, beforeAll, expect, it } from 'bun:test';
import { createJwtAuthority } from '../../src/auth/jwt';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/log';
import { type RunningServer, serve } from '../../src/serve';

const JWT_SECRET = 'pipelining-tests-secret-at-least-32-bytes';
let server: RunningServer;
let bearer: string;
beforeAll(async () => {
  const config = loadConfig({ DATABASE_URL: ':memory:', HOST: '127.0.0.1', PORT: '0' });
  server = await serve(config, { jwtSecret: JWT_SECRET, logger: createLogger('silent') });
  const jwt = createJwtAuthority({ secret: JWT_SECRET, clock: () => Date.now() });
  bearer = `Bearer ${await jwt.sign({ sub: 7, ttlSeconds: 600 })}`;
});
afterAll(() => server.stop());

type Parsed = { status: number; headers: Record<string, string>; body: string };

/** Parses complete responses (Content-Length bodies) off the front of `buffer`. */
function parseResponses(buffer: string): Parsed[] {
  const responses: Parsed[] = [];
  let rest = buffer;
  for (;;) {
    const headEnd = rest.indexOf('\r\n\r\n');
    if (headEnd === -1) return responses;
    const [statusLine = '', ...lines] = rest.slice(0, headEnd).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    if (rest.length < headEnd + 4 + length) return responses;
    responses.push({
      status: Number(statusLine.split(' ')[1]),
      headers,
      body: rest.slice(headEnd + 4, headEnd + 4 + length),
    });
    rest = rest.slice(headEnd + 4 + length);
  }
}

/** Writes `requests` in ONE write and reads until `expected` responses arrived or the server closed. */
async function pipeline(
  requests: string[],
  expected: number,
): Promise<{ responses: Parsed[]; closed: boolean }> {
  const { port, hostname } = server.url;
  let received = '';
  let closed = false;
  await new Promise<void>((resolve, reject) => {
    Bun.connect({
      hostname,
      port: Number(port),
      socket: {
        open(socket) {
          socket.write(requests.join(''));
        },
        data(socket, chunk) {
          received += chunk.toString('latin1');
          if (parseResponses(received).length >= expected) {
            socket.end();
            resolve();
          }
        },
        close() {
          closed = true;
          resolve();
        },
        error(_socket, error) {
          reject(error);
        },
      },
    }).catch(reject);
  });
  return { responses: parseResponses(received), closed };
}

function request(method: string, path: string, body?: unknown): string {
  const text = body === undefined ? '' : JSON.stringify(body);
  const head = [
    `${method} ${path} HTTP/1.1`,
    `Host: ${server.url.host}`,
    `Authorization: ${bearer}`,
    ...(body === undefined ? [] : ['Content-Type: application/json']),
    `Content-Length: ${Buffer.byteLength(text)}`,
  ];
  return `${head.join('\r\n')}\r\n\r\n${text}`;
}

it.todo('answers three pipelined creates and then three pipelined deletes, each in order', async () => {
  const names = ['first', 'second', 'third'];
  const created = await pipeline(
    names.map((name) => request('POST', '/apikeys/jwt', { name, level: 1, expiresIn: 600 })),
    3,
  );
  expect(created.responses.map((r) => r.status)).toEqual([201, 201, 201]);
  const keys = created.responses.map((r) => JSON.parse(r.body).apikey);
  // In order: each answer belongs to the request at the same position.
  expect(keys.map((k) => k.name)).toEqual(names);
  for (const key of keys) expect(key.secret).toEqual(expect.any(String));

  const deleted = await pipeline(
    keys.map((k) => request('DELETE', `/apikeys/${k.key}/jwt`)),
    3,
  );
  expect(deleted.responses.map((r) => r.status)).toEqual([204, 204, 204]);
  // Deleted really: a second round of the same deletes answers 404 for each, again all three.
  const again = await pipeline(
    keys.map((k) => request('DELETE', `/apikeys/${k.key}/jwt`)),
    3,
  );
  expect(again.responses.map((r) => r.status)).toEqual([404, 404, 404]);
});

it.todo('answers a pipelined mix of a create, a refused create and a health check in order', async () => {
  const { responses } = await pipeline(
    [
      request('POST', '/apikeys/jwt', { name: 'mix', level: 1, expiresIn: 600 }),
      request('POST', '/apikeys/jwt', { name: 5 }),
      `GET /health HTTP/1.1\r\nHost: ${server.url.host}\r\n\r\n`,
    ],
    3,
  );
  expect(responses.map((r) => r.status)).toEqual([201, 400, 200]);
  expect(JSON.parse(responses[0]?.body ?? '{}').apikey.name).toBe('mix');
});
