// What the middleware costs a guarded request: wrk against a Hono app (a) calling nothing, (b) guarded
// by @keygate/client/hono, (c) calling /forward-auth by hand with fetch. The app runs on CPU 0;
// keygate and wrk share CPU 1 (a 2-core machine has no third). Rounds interleave the four forms
// (bench/middleware-app.ts); each figure is the median of its rounds. Prints guarded ÷ plain, guarded
// ÷ by-hand (a /forward-auth call) and guarded ÷ by-hand verify (the call the middleware makes).
// Usage: bun bench/middleware.ts [rounds=5] [seconds=5]
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mintToken } from '../examples/integrate/mint-token';
import { buildBinary, readStartLine } from '../test/support/binary';
import { cpuUs } from './process-cpu';
import { wrkOnce } from './wrk';

const rounds = Number(process.argv[2] ?? 5);
const seconds = Number(process.argv[3] ?? 5);
const root = join(import.meta.dir, '..');
const binary = join(root, 'dist', 'keygate');
const secret = 'bench-middleware-secret-at-least-32-bytes';
if (!existsSync(binary)) buildBinary(binary);

const keygate = Bun.spawn(['taskset', '-c', '1', binary, 'serve'], {
  env: {
    PATH: process.env.PATH ?? '',
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_URL: ':memory:',
    JWT_SECRET: secret,
  },
  stdout: 'pipe',
});
const keygateLog = (keygate.stdout as ReadableStream<Uint8Array>).getReader();
const keygateUrl = (await readStartLine(keygateLog)).url.replace(/\/$/, '');
void (async () => {
  while (!(await keygateLog.read()).done) {}
})();

const created = await fetch(`${keygateUrl}/apikeys/jwt`, {
  method: 'POST',
  headers: { authorization: `Bearer ${await mintToken(1, secret)}`, 'content-type': 'application/json' },
  body: JSON.stringify({ name: 'bench', level: 1, expiresIn: 3600 }),
});
const { apikey } = (await created.json()) as { apikey: { key: string; secret: string } };
const scratch = mkdtempSync(join(tmpdir(), 'keygate-bench-middleware-'));
const authorizations = join(scratch, 'authorization');
writeFileSync(authorizations, `Basic ${btoa(`${apikey.key}:${apikey.secret}`)}\n`);

const forms = ['plain', 'guarded', 'by-hand', 'by-hand-verify'] as const;
const apps = new Map<string, { url: string; process: ReturnType<typeof Bun.spawn> }>();
for (const form of forms) {
  const app = Bun.spawn(
    ['taskset', '-c', '0', 'bun', join(import.meta.dir, 'middleware-app.ts'), form, keygateUrl],
    {
      stdout: 'pipe',
    },
  );
  const { value } = await (app.stdout as ReadableStream<Uint8Array>).getReader().read();
  apps.set(form, {
    url: `http://127.0.0.1:${JSON.parse(new TextDecoder().decode(value)).port}`,
    process: app,
  });
}

const rates: Record<string, number[]> = { plain: [], guarded: [], 'by-hand': [], 'by-hand-verify': [] };
// CPU µs per request of the app and of keygate: what each form costs, whichever core is the bottleneck.
const appCpu: Record<string, number[]> = { plain: [], guarded: [], 'by-hand': [], 'by-hand-verify': [] };
const keygateCpu: Record<string, number[]> = { plain: [], guarded: [], 'by-hand': [], 'by-hand-verify': [] };
try {
  for (const form of forms)
    wrkOnce(`${apps.get(form)?.url}`, 'authorized-get.lua', ['/api/whoami', authorizations], 1);
  for (let round = 0; round < rounds; round++) {
    for (const form of round % 2 === 0 ? forms : [...forms].reverse()) {
      const app = apps.get(form);
      if (app === undefined) throw new Error(`no app for ${form}`);
      const before = { app: cpuUs(app.process.pid), keygate: cpuUs(keygate.pid) };
      const run = wrkOnce(app.url, 'authorized-get.lua', ['/api/whoami', authorizations], seconds);
      if (run.non2xx > 0) throw new Error(`${form}: ${run.non2xx} answers were not 2xx`);
      rates[form]?.push(run.requests / (run.durationUs / 1e6));
      appCpu[form]?.push((cpuUs(app.process.pid) - before.app) / run.requests);
      keygateCpu[form]?.push((cpuUs(keygate.pid) - before.keygate) / run.requests);
    }
  }
} finally {
  for (const { process } of apps.values()) process.kill();
  keygate.kill();
  rmSync(scratch, { recursive: true, force: true });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const figures = Object.fromEntries(forms.map((form) => [form, Math.round(median(rates[form] ?? []))]));
console.log(`rounds ${rounds} × ${seconds} s; requests/s (median): ${JSON.stringify(figures)}`);
const cpu = (of: Record<string, number[]>) =>
  JSON.stringify(Object.fromEntries(forms.map((form) => [form, Number(median(of[form] ?? []).toFixed(1))])));
console.log(`CPU µs a request (median), the app: ${cpu(appCpu)}`);
console.log(`CPU µs a request (median), keygate: ${cpu(keygateCpu)}`);
console.log(`guarded ÷ plain:   ${((figures.guarded ?? 0) / (figures.plain ?? 1)).toFixed(3)}`);
console.log(`guarded ÷ by-hand: ${((figures.guarded ?? 0) / (figures['by-hand'] ?? 1)).toFixed(3)}`);
console.log(
  `guarded ÷ by-hand verify (the same call the middleware makes): ${((figures.guarded ?? 0) / (figures['by-hand-verify'] ?? 1)).toFixed(3)}`,
);
