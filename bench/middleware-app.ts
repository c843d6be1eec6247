// The app bench/middleware.ts measures, in one of three forms: `plain` (a Hono app calling nothing),
// `guarded` (the same app behind @keygate/client/hono) or `by-hand` (the same app calling /forward-auth
// itself with fetch). Usage: bun bench/middleware-app.ts <form> <keygate url>; prints its port.
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
app.get('/api/whoami', (c) => c.json({ userId: c.get('keygate')?.userId ?? null }));
const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: app.fetch });
console.log(JSON.stringify({ port: server.port }));
