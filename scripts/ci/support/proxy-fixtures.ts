// The two small servers scripts/ci/proxy-smoke.sh puts around nginx and Caddy, on 127.0.0.1:
//  - the upstream application: answers every request with what it received (method, path, body, and
//    the headers, credentials shown only as present), and counts the requests it saw per check tag;
//  - a wire tap between the proxies and keygate: a TCP relay that forwards bytes unchanged and counts
//    the auth requests and whether the body marker ever went towards keygate.
//   bun scripts/ci/support/proxy-fixtures.ts <keygate-port> <state-file> <body-marker>
// Writes {"upstream":port,"tap":port,"free":[port,port]} to <state-file> once both listen. Nothing it
// receives is logged; it holds credentials only in memory and stops on SIGTERM.
import { writeFileSync } from 'node:fs';
import type { Socket } from 'bun';

const [keygatePort, stateFile, marker] = process.argv.slice(2);
if (!keygatePort || !stateFile || !marker) {
  console.error('usage: proxy-fixtures.ts <keygate-port> <state-file> <body-marker>');
  process.exit(2);
}

const CREDENTIAL_HEADERS = new Set(['authorization', 'x-api-key', 'x-api-secret']);
const seenByTag = new Map<string, number>();

const upstream = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === '/__fixtures/seen') {
      return Response.json({ upstream: Object.fromEntries(seenByTag), tap: tapStats() });
    }
    const tag = request.headers.get('x-smoke-check') ?? '';
    seenByTag.set(tag, (seenByTag.get(tag) ?? 0) + 1);
    const headers: Record<string, string> = {};
    for (const [name, value] of request.headers) {
      headers[name] = CREDENTIAL_HEADERS.has(name) ? '<present>' : value;
    }
    return Response.json({
      method: request.method,
      path: url.pathname + url.search,
      headers,
      body: await request.text(),
    });
  },
});

// Bytes towards keygate, all connections together (a test sends a few kilobytes in all).
let towardsKeygate = '';
const tapStats = () => ({
  requests: (towardsKeygate.match(/ HTTP\/1\.[01]\r\n/g) ?? []).length,
  markerSeen: towardsKeygate.includes(marker),
});

type Link = { server?: Socket<undefined>; pending: Uint8Array[] };
const tap = Bun.listen<Link>({
  hostname: '127.0.0.1',
  port: 0,
  socket: {
    open(client) {
      client.data = { pending: [] };
      Bun.connect<undefined>({
        hostname: '127.0.0.1',
        port: Number(keygatePort),
        socket: {
          open(server) {
            client.data.server = server;
            for (const chunk of client.data.pending) server.write(chunk);
            client.data.pending = [];
          },
          data(_server, chunk) {
            client.write(chunk);
          },
          close() {
            client.end();
          },
          error() {
            client.end();
          },
        },
      }).catch(() => client.end());
    },
    data(client, chunk) {
      towardsKeygate += new TextDecoder().decode(chunk);
      if (client.data.server) client.data.server.write(chunk);
      else client.data.pending.push(new Uint8Array(chunk));
    },
    close(client) {
      client.data.server?.end();
    },
  },
});

/** Ports nobody listens on right now, for nginx and Caddy (the kernel picks; the tiny race is acceptable). */
function freePort(): number {
  const probe = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

writeFileSync(
  stateFile,
  JSON.stringify({ upstream: upstream.port, tap: tap.port, free: [freePort(), freePort()] }),
);
process.on('SIGTERM', () => {
  upstream.stop(true);
  tap.stop(true);
  process.exit(0);
});
