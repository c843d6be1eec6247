// HTTP/1.1 pipelining over a real socket: several requests in one TCP write. Bun 1.4.4 and 1.4.5 close
// such a connection unanswered when a response is still pending as the next request is parsed (every
// write waits for the group commit), so keygate must not commit what it could not answer.
import { afterAll, beforeAll, expect, it } from 'bun:test';
import type { RunningServer } from '../../src/serve';
import {
  parseRawResponses,
  type RawResponse,
  socketBearer,
  startSocketServer,
} from '../support/socket-server';

let server: RunningServer;
let nextUser = 1;
beforeAll(async () => {
  server = await startSocketServer();
});
afterAll(() => server.stop());

/** A fresh user for each test, so counts never mix. */
async function freshUser(): Promise<string> {
  return socketBearer(nextUser++);
}

const createRequest = (bearer: string, name: string) => {
  const body = JSON.stringify({ name, level: 1, expiresIn: 3600 });
  return `POST /apikeys/jwt HTTP/1.1\r\nHost: keygate.test\r\nAuthorization: ${bearer}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
};
const deleteRequest = (bearer: string, id: string) =>
  `DELETE /apikeys/${id}/jwt HTTP/1.1\r\nHost: keygate.test\r\nAuthorization: ${bearer}\r\n\r\n`;

/**
 * Writes each group of requests in one write, the next group once the previous one is answered or
 * the connection closed; returns every complete response, in the order received.
 */
async function exchange(groups: string[][]): Promise<RawResponse[]> {
  let received = '';
  let closed = false;
  let wake = () => {};
  const socket = await Bun.connect({
    hostname: '127.0.0.1',
    port: Number(server.url.port),
    socket: {
      data(_socket, chunk) {
        received += new TextDecoder().decode(chunk);
        wake();
      },
      close() {
        closed = true;
        wake();
      },
      error() {
        closed = true;
        wake();
      },
    },
  });
  let expected = 0;
  for (const group of groups) {
    if (closed) break;
    expected += group.length;
    socket.write(group.join(''));
    // A bound, not a measurement: a server that neither answers nor closes fails the test below.
    const deadline = Bun.sleep(5000);
    while (!closed && parseRawResponses(received).length < expected) {
      const { promise, resolve } = Promise.withResolvers<void>();
      wake = resolve;
      if ((await Promise.race([promise.then(() => 'data'), deadline.then(() => 'late')])) === 'late') break;
    }
  }
  socket.end();
  return parseRawResponses(received);
}

async function liveKeyIds(bearer: string): Promise<string[]> {
  const response = await fetch(new URL('apikeys/jwt?limit=100', server.url), {
    headers: { authorization: bearer },
  });
  expect(response.status).toBe(200);
  const { apikeys } = (await response.json()) as { apikeys: Array<{ key: string }> };
  return apikeys.map((apikey) => apikey.key).sort();
}

async function createKeys(bearer: string, count: number): Promise<string[]> {
  const answers = await exchange(Array.from({ length: count }, (_, i) => [createRequest(bearer, `k${i}`)]));
  expect(answers.map((answer) => answer.status)).toEqual(Array(count).fill(201));
  return answers.map((answer) => (JSON.parse(answer.body) as { apikey: { key: string } }).apikey.key);
}

it('answers three creates sent one after another on one connection (the harness counts answers)', async () => {
  const bearer = await freshUser();
  const keys = await createKeys(bearer, 3);
  expect(await liveKeyIds(bearer)).toEqual([...keys].sort());
});

it('three pipelined creates: a key exists only if its 201 (and so its secret) reached the client', async () => {
  const bearer = await freshUser();
  const answers = await exchange([[1, 2, 3].map((i) => createRequest(bearer, `pipelined ${i}`))]);
  const answered = answers
    .filter((answer) => answer.status === 201)
    .map((answer) => (JSON.parse(answer.body) as { apikey: { key: string } }).apikey.key);
  expect(await liveKeyIds(bearer)).toEqual(answered.sort());
});

it('three pipelined deletes: a key is gone only if its 204 reached the client', async () => {
  const bearer = await freshUser();
  const keys = await createKeys(bearer, 3);
  const answers = await exchange([keys.map((key) => deleteRequest(bearer, key))]);
  const deleted = new Set(keys.filter((_, i) => answers[i]?.status === 204));
  expect(answers.filter((answer) => answer.status === 204)).toHaveLength(deleted.size);
  expect(await liveKeyIds(bearer)).toEqual(keys.filter((key) => !deleted.has(key)).sort());
});

// Answering all three in order is test/http/pipelining.test.ts (a test.todo, blocked on Bun).
