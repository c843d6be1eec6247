// What a server does in the bench's window: each build is started fresh on CPU 0 (a fresh copy of one
// database of 10,000 plain keys and 10,000 limited ones), driven by wrk on CPU 1 for W s of warm-up,
// then measured for S s as bench/run.ts measures a case: its requests per second, p99 and max
// latency, the CPU per request of each of its threads (the main thread, the JIT's, the collector's:
// /proc/<pid>/task), and the collector's work over the server's life (warm-up and window) from Bun's
// own log (BUN_JSC_logGC=1, which reaches its file in chunks): young collections (their count and
// mean pause) and every collection's whole cycle, the concurrent part included, which on one shared
// core takes the main thread's time. The builds take turns, round after round; medians.
// KEYS=limited (not passed on) drives a build with 10,000 other keys, each with a rate limit no load
// reaches, as the bench's limited case. Run it under the load lock:
//   flock /tmp/keygate-load.lock bun bench/fresh-windows.ts <verify|forward-auth> [--rounds 5]
//     [--warmup 3] [--seconds 4] name=binary[,VAR=value...] ...
// e.g. a change against the build before it, and 657c95d's:
//   bun bench/fresh-windows.ts forward-auth before=/tmp/before/dist/keygate after=dist/keygate base=/tmp/kg-base
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BENCH_RATE_LIMIT } from './cases';
import { median } from './figures';
import { seedKeys, verifyKeySpec } from './seed';
import { wrkOnce } from './wrk';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '4' },
  },
});
const [kind, ...specs] = positionals;
if ((kind !== 'verify' && kind !== 'forward-auth') || specs.length === 0) {
  console.error(
    'usage: fresh-windows.ts <verify|forward-auth> [--rounds N] [--warmup W] [--seconds S] name=binary[,VAR=value...] ...',
  );
  process.exit(2);
}
const rounds = Number(values.rounds);
const warmup = Number(values.warmup);
const seconds = Number(values.seconds);

type Build = { name: string; binary: string; keys: string; env: Record<string, string> };
const builds: Build[] = specs.map((spec) => {
  const [named, ...vars] = spec.split(',');
  const at = (named as string).indexOf('=');
  if (at < 1) throw new Error(`${spec}: expected name=binary`);
  const { KEYS: keys = 'plain', ...env } = Object.fromEntries(
    vars.map((pair) => pair.split('=') as [string, string]),
  );
  if (keys !== 'plain' && keys !== 'limited') throw new Error(`${spec}: KEYS is plain or limited`);
  return { name: (named as string).slice(0, at), binary: (named as string).slice(at + 1), keys, env };
});

const dir = mkdtempSync(join(tmpdir(), 'fresh-windows-'));
const template = join(dir, 'keys.db');
const basics: string[] = [];
const bodies: string[] = [];
const limitedBasics: string[] = [];
const limitedBodies: string[] = [];
seedKeys(template, [
  verifyKeySpec({
    onKey(id, secret) {
      basics.push(`Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`);
      bodies.push(JSON.stringify({ key: id, secret }));
    },
  }),
  verifyKeySpec({
    ratelimit: BENCH_RATE_LIMIT,
    onKey(id, secret) {
      limitedBasics.push(`Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`);
      limitedBodies.push(JSON.stringify({ key: id, secret }));
    },
  }),
]);
/** The load of each KEYS= setting: wrk's script and its arguments. */
const loads = Object.fromEntries(
  (
    [
      ['plain', bodies, basics],
      ['limited', limitedBodies, limitedBasics],
    ] as const
  ).map(([keys, verifyBodies, authorizations]) => {
    const file = join(dir, `${keys}.txt`);
    writeFileSync(file, `${(kind === 'verify' ? verifyBodies : authorizations).join('\n')}\n`);
    const load: [string, string[]] =
      kind === 'verify'
        ? ['post-body.lua', ['/apikeys/verify', file]]
        : ['authorized-get.lua', ['/forward-auth', file]];
    return [keys, load];
  }),
);

/** CPU µs so far of each thread, by its name (numbers at the end of a name left out). */
function threadCpu(pid: number): Map<string, number> {
  const cpu = new Map<string, number>();
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/\d+$/, '#');
      const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
      cpu.set(`${task} ${name}`, (Number(fields[11]) + Number(fields[12])) * 10_000);
    } catch {
      // the thread ended meanwhile
    }
  }
  return cpu;
}

const figures = new Map<string, Map<string, number[]>>();
const note = (build: string, figure: string, value: number) => {
  const own = figures.get(build) ?? new Map<string, number[]>();
  figures.set(build, own);
  own.set(figure, [...(own.get(figure) ?? []), value]);
};

let port = 20_000 + (process.pid % 20_000);
for (let round = 1; round <= rounds; round++) {
  for (const build of round % 2 === 1 ? builds : [...builds].reverse()) {
    const db = join(dir, `${build.name}.db`);
    copyFileSync(template, db);
    const gcLog = join(dir, `${build.name}.gc`);
    port++;
    const child = Bun.spawn(['taskset', '-c', '0', build.binary, 'serve'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_URL: db,
        JWT_SECRET: randomBytes(40).toString('base64url'),
        BUN_JSC_logGC: '1',
        ...build.env,
      },
      stdout: 'ignore',
      stderr: Bun.file(gcLog),
    });
    const url = `http://127.0.0.1:${port}`;
    try {
      for (let tries = 0; ; tries++) {
        try {
          if ((await fetch(`${url}/health`)).ok) break;
        } catch {
          // not listening yet
        }
        if (tries === 200) throw new Error(`${build.name} did not start`);
        await Bun.sleep(50);
      }
      const [script, args] = loads[build.keys] as [string, string[]];
      wrkOnce(url, script, args, warmup);
      const before = threadCpu(child.pid);
      const run = wrkOnce(url, script, args, seconds);
      const after = threadCpu(child.pid);
      const latency = JSON.parse(run.line.slice(run.line.indexOf('{')));
      if (run.non2xx > 0) throw new Error(`${build.name}: ${run.non2xx} answers were not 2xx`);
      note(build.name, 'req/s', run.requests / (run.durationUs / 1e6));
      note(build.name, 'p99 ms', latency.p99_us / 1000);
      note(build.name, 'max ms', latency.max_us / 1000);
      const byName = new Map<string, number>();
      for (const [thread, us] of after) {
        const name = thread.slice(thread.indexOf(' ') + 1);
        byName.set(name, (byName.get(name) ?? 0) + us - (before.get(thread) ?? 0));
      }
      for (const [name, us] of byName) note(build.name, `CPU µs/req ${name}`, us / run.requests);
    } finally {
      child.kill();
      await child.exited;
    }
    // The log reaches its file in chunks, the last at exit: it is read whole, warm-up included.
    const log = readFileSync(gcLog, 'utf8');
    const young = [...log.matchAll(/EdenCollection.*?p=([\d.]+)ms/g)].map((m) => Number(m[1]));
    const cycles = [...log.matchAll(/cycle ([\d.]+)ms END/g)].map((m) => Number(m[1]));
    note(build.name, 'young GCs', young.length);
    note(build.name, 'young pause ms', young.reduce((a, b) => a + b, 0) / Math.max(1, young.length));
    note(
      build.name,
      'GC cycles ms',
      cycles.reduce((a, b) => a + b, 0),
    );
    note(build.name, 'longest cycle ms', Math.max(0, ...cycles));
  }
}
rmSync(dir, { recursive: true, force: true });

console.log(
  `${kind}, ${rounds} rounds: each build fresh, ${warmup} s of warm-up, then ${seconds} s measured; medians of rounds`,
);
for (const [build, own] of figures) {
  // A thread named in only some rounds counts 0 in the others.
  const shown = [...own].map(([figure, list]) => {
    const all = [...list, ...Array(Math.max(0, rounds - list.length)).fill(0)];
    return `${figure} ${median(all).toFixed(figure.startsWith('req') || figure.startsWith('young GCs') ? 0 : 2)}`;
  });
  console.log(`${build}: ${shown.filter((line) => !/ 0\.0[0-4]$/.test(line)).join(', ')}`);
}
