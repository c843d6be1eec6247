// The client's address over a real socket (127.0.0.1): keygate reads the TCP peer from Bun's server,
// believes X-Forwarded-For only from a peer in TRUSTED_PROXIES, and judges keys with allowedIps by
// it on forward-auth and the /key routes. A client that sends its own X-Forwarded-For to a keygate
// that does not trust it changes nothing.
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import type { RunningServer } from '../../src/serve';
import { socketBearer, startSocketServer } from '../support/socket-server';

const servers: RunningServer[] = [];
afterAll(() => Promise.all(servers.map((server) => server.stop())));

async function started(env: Record<string, string>) {
  const server = await startSocketServer(env);
  servers.push(server);
  return server;
}

async function keyFor(server: RunningServer, allowedIps: string[]) {
  const created = await fetch(new URL('apikeys/jwt', server.url), {
    method: 'POST',
    headers: { authorization: await socketBearer(42), 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'fenced', level: 3, expiresIn: 600, allowedIps }),
  });
  const { apikey } = (await created.json()) as { apikey: { key: string; secret: string } };
  return `Basic ${Buffer.from(`${apikey.key}:${apikey.secret}`).toString('base64')}`;
}

const ask = (server: RunningServer, path: string, authorization: string, forwardedFor?: string) =>
  fetch(new URL(path, server.url), {
    headers: { authorization, ...(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }) },
  });

describe('without TRUSTED_PROXIES', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await started({});
  });

  it('judges a key by its TCP peer, 127.0.0.1', async () => {
    const loopback = await keyFor(server, ['127.0.0.0/8']);
    expect((await ask(server, 'forward-auth', loopback)).status).toBe(200);
    expect((await ask(server, 'apikeys/key', loopback)).status).toBe(200);
  });

  it("ignores a client's own X-Forwarded-For", async () => {
    const elsewhere = await keyFor(server, ['203.0.113.0/24']);
    const forged = await ask(server, 'forward-auth', elsewhere, '203.0.113.5');
    expect(forged.status).toBe(403);
    expect(forged.headers.get('x-keygate-code')).toBe('IP_NOT_ALLOWED');
    expect((await ask(server, 'apikeys/key', elsewhere, '203.0.113.5')).status).toBe(403);
  });
});

describe('with TRUSTED_PROXIES naming the peer', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await started({ TRUSTED_PROXIES: '127.0.0.1' });
  });

  it('takes the rightmost untrusted address of X-Forwarded-For', async () => {
    const fenced = await keyFor(server, ['203.0.113.0/24']);
    expect((await ask(server, 'forward-auth', fenced, '203.0.113.5')).status).toBe(200);
    expect((await ask(server, 'forward-auth', fenced, '203.0.113.5, 198.51.100.1')).status).toBe(403);
    expect((await ask(server, 'forward-auth', fenced, '198.51.100.1, 203.0.113.5')).status).toBe(200);
    expect((await ask(server, 'apikeys/key', fenced, '203.0.113.5')).status).toBe(200);
    expect((await ask(server, 'forward-auth', fenced)).status).toBe(403); // the proxy itself
  });
});
