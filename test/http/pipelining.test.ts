// Several HTTP/1.1 requests in one TCP write: every one is answered, in order (HTTP/1.1
// pipelining; docs/security.md says why Bun 1.4.4 and 1.4.5 do not yet).
// Only a real socket shows this; app.handle never sees how Bun parses a connection.
import { afterAll, beforeAll, expect, it } from 'bun:test';
import type { RunningServer } from '../../src/serve';
import {
  parseRawResponses,
  type RawResponse,
  socketBearer,
  socketOperatorBearer,
  startSocketServer,
} from '../support/socket-server';

let server: RunningServer;
let bearer: string;
let operatorBearer: string;
beforeAll(async () => {
  server = await startSocketServer();
  bearer = await socketBearer(7);
  operatorBearer = await socketOperatorBearer();
});
afterAll(() => server.stop());

/** Writes `requests` in ONE write and reads until `expected` responses arrived or the server closed. */
async function pipeline(
  requests: string[],
  expected: number,
): Promise<{ responses: RawResponse[]; closed: boolean }> {
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
          if (parseRawResponses(received).length >= expected) {
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
  return { responses: parseRawResponses(received), closed };
}

function request(method: string, path: string, body?: unknown, authorization = bearer): string {
  const text = body === undefined ? '' : JSON.stringify(body);
  const head = [
    `${method} ${path} HTTP/1.1`,
    `Host: ${server.url.host}`,
    `Authorization: ${authorization}`,
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

it.todo('answers three pipelined updates (PATCH) in order', async () => {
  const created = await Promise.all(
    ['a', 'b', 'c'].map(async (name) => {
      const response = await fetch(new URL('apikeys/jwt', server.url), {
        method: 'POST',
        headers: { authorization: bearer, 'content-type': 'application/json' },
        body: JSON.stringify({ name, level: 1, expiresIn: 600 }),
      });
      return ((await response.json()) as { apikey: { key: string } }).apikey.key;
    }),
  );
  const { responses } = await pipeline(
    created.map((key, i) => request('PATCH', `/apikeys/${key}/jwt`, { name: `renamed ${i}` })),
    3,
  );
  expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
  expect(responses.map((r) => JSON.parse(r.body).apikey.name)).toEqual([
    'renamed 0',
    'renamed 1',
    'renamed 2',
  ]);
});

it.todo("answers three pipelined operator writes of a user's policy (PUT) in order", async () => {
  const policy = { ratelimit: null, credits: null, maxKeys: 5, maxLevel: 4 };
  const { responses } = await pipeline(
    [21, 22, 23].map((user) => request('PUT', `/admin/users/${user}/policy`, policy, operatorBearer)),
    3,
  );
  expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
});

it.todo("answers three pipelined revoke-alls of the operator's in order", async () => {
  const { responses } = await pipeline(
    [31, 32, 33].map((user) => request('DELETE', `/admin/users/${user}/apikeys`, undefined, operatorBearer)),
    3,
  );
  expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
});
