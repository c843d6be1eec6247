// A real keygate listening on 127.0.0.1 and a free port, for the tests app.handle cannot serve
// (connections, pipelining, timeouts, bodies that are never sent), a token for it, and a parser for
// the raw HTTP responses such tests read off a socket.
import { createJwtAuthority } from '../../src/auth/jwt';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { type RunningServer, serve } from '../../src/serve';

export const SOCKET_JWT_SECRET = 'socket-tests-secret-at-least-32-bytes-long';

/** keygate on in-memory SQLite, 127.0.0.1, a port the kernel picks; `env` adds settings. */
export function startSocketServer(env: Record<string, string> = {}): Promise<RunningServer> {
  const config = loadConfig({ DATABASE_URL: ':memory:', HOST: '127.0.0.1', PORT: '0', ...env });
  return serve(config, { jwtSecret: SOCKET_JWT_SECRET, logger: createLogger('silent') });
}

const jwt = createJwtAuthority({ secret: SOCKET_JWT_SECRET, clock: () => Date.now() });

/** `Bearer <token>` for user `sub`, valid ten minutes. */
export async function socketBearer(sub: number): Promise<string> {
  return `Bearer ${await jwt.sign({ sub, ttlSeconds: 600 })}`;
}

/** `Bearer <token>` for the operator (the default JWT_ADMIN_SCOPE), valid ten minutes. */
export async function socketOperatorBearer(): Promise<string> {
  return `Bearer ${await jwt.sign({ sub: 'ops', scope: 'keygate:admin', ttlSeconds: 600 })}`;
}

export type RawResponse = { status: number; headers: Record<string, string>; body: string };

/** The complete responses at the front of `buffer` (every keygate response carries Content-Length). */
export function parseRawResponses(buffer: string): RawResponse[] {
  const responses: RawResponse[] = [];
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
