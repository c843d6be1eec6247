// The app bench/middleware.ts measures, in one of four forms: `plain` (a Hono app calling nothing),
// `guarded` (the same app behind @keygate/client/hono), `by-hand` (the same app calling /forward-auth
// itself with fetch) or `by-hand-verify` (calling /apikeys/verify itself, with the key, the secret and
// the client's address, as the middleware does). Usage: bun bench/middleware-app.ts <form> <keygate
// url>; prints its port.
import { keygate } from '@keygate/client/hono';
import { Hono } from 'hono';

const [form, url = ''] = process.argv.slice(2);
const app = new Hono();
if (form === 'guarded') app.use('/api/*', keygate({ url }));
if (form === 'by-hand') {
  app.use('/api/*', async (c, next) => {
    const headers: Record<string, string> = {};
    for (const name of ['authorization', 'x-api-key', 'x-api-secret']) {
      const value = c.req.header(name);
      if (value !== undefined) headers[name] = value;
    }
    const answer = await fetch(`${url}/forward-auth`, { headers });
    if (answer.status !== 200) return new Response(answer.body, answer);
    c.set('keygate', ((await answer.json()) as { principal: never }).principal);
    await next();
  });
}
if (form === 'by-hand-verify') {
  app.use('/api/*', async (c, next) => {
    // The bench sends Basic credentials only.
    const decoded = atob((c.req.header('authorization') ?? '').slice('Basic '.length));
    const colon = decoded.indexOf(':');
    const clientIp = '127.0.0.1'; // every client of the bench is on loopback
    const answer = await fetch(`${url}/apikeys/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ key: decoded.slice(0, colon), secret: decoded.slice(colon + 1), clientIp }),
    });
    const verdict = (await answer.json()) as { valid: boolean; principal: never };
    if (!verdict.valid) return c.json({ result: 'error', error: 'refused' }, 403);
    c.set('keygate', verdict.principal);
    await next();
  });
}
app.get('/api/whoami', (c) => c.json({ userId: c.get('keygate')?.userId ?? null }));
const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: app.fetch });
console.log(JSON.stringify({ port: server.port }));
