// CPU µs per request of one server under wrk: the server process's utime + stime (from /proc) over
// the requests wrk completed, server pinned to CPU 0 and wrk (-t1 -c64) to CPU 1, after a 2 s warm-up.
// On a busy shared host req/s swings by tens of percent; the CPU a request costs moves far less, so
// this is how the verify path's steps are compared (bench/RESULTS.md). Run it under the load lock,
// a few rounds interleaved with whatever it is compared to, and read medians:
//   flock /tmp/keygate-load.lock bun bench/cpu-per-request.ts <case> [seconds] [keygate]
// case: verify | forward-auth (keygate, 10,000 seeded keys in rotation, as bench/run.ts),
//       verify-floor | forward-auth-floor (bench/verify-floor.ts on the same keys),
//       ceiling-post | ceiling-get (bench/ceiling.ts). keygate: a binary (default dist/keygate) or
//       `src` (src/cli.ts from source). Prints one line: case, requests, req/s, µs CPU per request.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seedKeys } from './seed';

const CASES = ['verify', 'forward-auth', 'verify-floor', 'forward-auth-floor', 'ceiling-post', 'ceiling-get'];
const [kind = '', seconds = '5', keygate = 'dist/keygate'] = process.argv.slice(2);
if (!CASES.includes(kind))
  throw new Error(`usage: cpu-per-request.ts <${CASES.join('|')}> [seconds] [keygate]`);

const root = join(import.meta.dir, '..');
const dir = mkdtempSync(join(tmpdir(), 'keygate-cpu-'));
const db = join(dir, 'keygate.db');
const bodies: string[] = [];
const basics: string[] = [];
seedKeys(db, [
  {
    count: 10_000,
    userOf: (i) => (i % 1000) + 1,
    level: 8,
    expiresAt: Date.now() + 86_400_000,
    name: 'bench verify',
    onKey(id, secret) {
      bodies.push(JSON.stringify({ key: id, secret }));
      basics.push(`Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`);
    },
  },
]);
const bodyFile = join(dir, 'bodies.txt');
const basicFile = join(dir, 'basics.txt');
writeFileSync(bodyFile, `${bodies.join('\n')}\n`);
writeFileSync(basicFile, `${basics.join('\n')}\n`);

const port = 4000 + (process.pid % 500);
const url = `http://127.0.0.1:${port}`;
const command = kind.startsWith('ceiling')
  ? ['bun', join(import.meta.dir, 'ceiling.ts')]
  : kind.endsWith('floor')
    ? ['bun', join(import.meta.dir, 'verify-floor.ts'), String(port), db]
    : keygate === 'src'
      ? ['bun', join(root, 'src', 'cli.ts'), 'serve']
      : [keygate, 'serve'];
const server = Bun.spawn(['taskset', '-c', '0', ...command], {
  env: {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOST: '127.0.0.1',
    PORT: String(port),
    DATABASE_URL: db,
    JWT_SECRET: randomBytes(40).toString('base64url'),
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
  },
  stdout: Bun.file(join(dir, 'server.log')),
  stderr: 'inherit',
});

const lua = (name: string) => join(import.meta.dir, 'lua', name);
const load = {
  verify: [lua('post-body.lua'), url, '--', '/apikeys/verify', bodyFile],
  'verify-floor': [lua('post-body.lua'), url, '--', '/apikeys/verify', bodyFile],
  'forward-auth': [lua('authorized-get.lua'), url, '--', '/forward-auth', basicFile],
  'forward-auth-floor': [lua('authorized-get.lua'), url, '--', '/forward-auth', basicFile],
  'ceiling-post': [lua('create.lua'), url, '--', '/apikeys/jwt', basicFile],
  'ceiling-get': [lua('get.lua'), `${url}/health`],
}[kind] as string[];
const wrk = (secs: string) =>
  Bun.spawnSync(['taskset', '-c', '1', 'wrk', '-t1', '-c64', `-d${secs}s`, '-s', ...load]).stdout.toString();

/** utime + stime of the server so far, in µs (/proc/<pid>/stat fields 14 and 15, in 10 ms ticks). */
const cpuUs = () => {
  const fields = readFileSync(`/proc/${server.pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
};

try {
  for (let i = 0; i < 1000; i++) {
    if (
      await fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await Bun.sleep(10);
  }
  wrk('2');
  const before = cpuUs();
  const out = wrk(seconds);
  const used = cpuUs() - before;
  const line = out.split('\n').find((l) => l.startsWith('BENCH_JSON '));
  if (line === undefined) throw new Error(`wrk gave no figures:\n${out}`);
  const run = JSON.parse(line.slice('BENCH_JSON '.length));
  console.log(
    `${kind}: ${run.requests} req, ${Math.round(run.requests / (run.duration_us / 1e6))} req/s, ` +
      `${(used / run.requests).toFixed(2)} µs CPU/request, non-2xx ${run.non2xx}`,
  );
} finally {
  server.kill('SIGTERM');
  await server.exited;
  rmSync(dir, { recursive: true, force: true });
}
