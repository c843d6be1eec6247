// The middleware keeps its connections to keygate alive: twenty guarded requests in a row reach keygate
// through a TCP relay that counts the connections opened to it (fetch keeps them alive by default on
// Bun and Node; this proves it for the adapters' one verify call).
import { afterAll, expect, it } from 'bun:test';
import { connect, createServer, type Socket } from 'node:net';
import { createClient } from '@keygate/client';
import { withKeygate } from '@keygate/client/fetch';
import { startKeygatesForClients } from './keygate-for-clients';

const keygates = await startKeygatesForClients();
afterAll(() => keygates.stop());

it('twenty guarded requests use one connection to keygate', async () => {
  const target = new URL(keygates.url);
  let connections = 0;
  const sockets: Socket[] = [];
  const relay = createServer((client) => {
    connections++;
    const upstream = connect(Number(target.port), target.hostname);
    sockets.push(client, upstream);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const { port } = relay.address() as { port: number };
  try {
    const { apikey } = await createClient({ url: keygates.url, token: keygates.token }).createKey({
      body: { name: 'keep-alive', level: 1, expiresIn: 60 },
    });
    const guarded = withKeygate({ url: `http://127.0.0.1:${port}` }, () => new Response('ok'));
    const headers = { 'x-api-key': apikey.key, 'x-api-secret': apikey.secret };
    for (let i = 0; i < 20; i++) {
      expect((await guarded(new Request('http://app/api', { headers }))).status).toBe(200);
    }
    expect(connections).toBe(1);
  } finally {
    for (const socket of sockets) socket.destroy();
    relay.close();
  }
});
