// A caller refused for its credentials (401, 403) is answered without keygate reading the request's
// body: Bun skips the body as it arrives, and the connection goes on with the next request. Only a
// real socket shows this; app.handle has no connection to skip bytes on.
import { afterAll, beforeAll, expect, it } from 'bun:test';
import type { Socket } from 'bun';
import type { RunningServer } from '../../src/serve';
import { parseRawResponses, socketBearer, startSocketServer } from '../support/socket-server';

let server: RunningServer;
beforeAll(async () => {
  server = await startSocketServer();
});
afterAll(() => server.stop());

/** One connection: writes to it, and a wait until its first `count` responses are complete. */
async function connect() {
  let received = '';
  let waiting: (() => void) | undefined;
  const socket: Socket = await Bun.connect({
    hostname: server.url.hostname,
    port: Number(server.url.port),
    socket: {
      data(_socket, chunk) {
        received += chunk.toString('latin1');
        waiting?.();
      },
    },
  });
  return {
    write: (text: string) => socket.write(text),
    /** The statuses once `count` responses are complete (waits as long as the test may run). */
    statuses: (count: number) =>
      new Promise<number[]>((resolve) => {
        waiting = () => {
          const responses = parseRawResponses(received);
          if (responses.length >= count) resolve(responses.map((response) => response.status));
        };
        waiting();
      }),
    end: () => socket.end(),
  };
}

const wrongKey = `Basic ${Buffer.from('kg_0000000000000000000000:nope').toString('base64')}`;
const health = () => `GET /health HTTP/1.1\r\nHost: ${server.url.host}\r\n\r\n`;
/** Looks like a request, to show that a skipped body is never taken for one: it would answer 404. */
const smuggled = () => `GET /smuggled HTTP/1.1\r\nHost: ${server.url.host}\r\n\r\n`;

function createHead(authorization: string | undefined, framing: string): string {
  return [
    'POST /apikeys/key HTTP/1.1',
    `Host: ${server.url.host}`,
    'Content-Type: application/json',
    ...(authorization === undefined ? [] : [`Authorization: ${authorization}`]),
    framing,
    '',
    '',
  ].join('\r\n');
}

it.each([
  ['401', undefined, 401],
  ['403', wrongKey, 403],
] as const)(
  'answers a %s before the body is sent, then skips the body when it comes',
  async (_name, authorization, status) => {
    // ~16 KiB, the largest body keygate takes, with a request inside, sent in three writes.
    const body = `${'x'.repeat(16 * 1024 - smuggled().length)}${smuggled()}`;
    const connection = await connect();
    connection.write(createHead(authorization, `Content-Length: ${body.length}`));
    // The answer comes while not a byte of the body was sent (were keygate waiting for it, this would
    // wait until the test times out).
    expect(await connection.statuses(1)).toEqual([status]);
    connection.write(body.slice(0, 5000));
    connection.write(body.slice(5000, 12_000));
    connection.write(body.slice(12_000) + health());
    expect(await connection.statuses(2)).toEqual([status, 200]);
    connection.end();
  },
);

it('skips a chunked body that comes after the 403 the same way', async () => {
  const connection = await connect();
  connection.write(`${createHead(wrongKey, 'Transfer-Encoding: chunked')}5\r\n{"nam\r\n`);
  expect(await connection.statuses(1)).toEqual([403]);
  const rest = smuggled();
  connection.write(`${rest.length.toString(16)}\r\n${rest}\r\n0\r\n\r\n${health()}`);
  expect(await connection.statuses(2)).toEqual([403, 200]);
  connection.end();
});

it('reads the body of a caller it accepts, and the connection goes on', async () => {
  const connection = await connect();
  const body = JSON.stringify({ name: 'accepted', level: 1, expiresIn: 600 });
  const head = createHead(await socketBearer(3), `Content-Length: ${body.length}`);
  connection.write(head.replace('/apikeys/key', '/apikeys/jwt'));
  connection.write(body);
  expect(await connection.statuses(1)).toEqual([201]);
  // Only now: a request sent while the create is still being answered would be pipelined, which
  // Bun 1.4.4 does not answer (docs/security.md).
  connection.write(health());
  expect(await connection.statuses(2)).toEqual([201, 200]);
  connection.end();
});
