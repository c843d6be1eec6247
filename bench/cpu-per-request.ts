// CPU µs per request of servers under the same load, measured interleaved: every server is up at once
// on CPU 0, and wrk (-t1 -c64, CPU 1) drives each in turn for a short window, round after round. On a
// busy shared host req/s swings by tens of percent within minutes; a server's CPU per request (utime
// + stime from /proc over the requests wrk completed) moves far less, and drift hits every server of a
// round alike, so the figures are medians of rounds and medians of per-round ratios to the first
// server. Run it under the load lock:
//   flock /tmp/keygate-load.lock bun bench/cpu-per-request.ts <verify|forward-auth|auth-failure|create>
//     [--rounds 10] [--seconds 1] [--fresh W] [--paired] <server> <server> ...
// auth-failure is the bench's 403 case: creates whose key has a wrong secret (the ceiling: its POST).
// --fresh W: as bench/run.ts measures, every server but the ceiling is started anew for each of its
// windows (on a fresh copy of the database) and warmed up for W s first; the ceiling stays up.
// --paired (all but create; needs the ceiling among the servers): each other server is driven
// at the same time as the ceiling, both on CPU 0 and two wrk on CPU 1, and compared with the ceiling
// of the same window. Whatever else the host runs then slows both alike, so the ratios hold still
// where figures taken one after the other swing by tens of percent.
// server: [name=]what[,VAR=value...], what being
//   ceiling       bench/ceiling.ts (its POST for verify and create, its GET /health for forward-auth)
//   floor         bench/verify-floor.ts on the same keys; floor+duties: with keygate's duties (for
//                 create: bench/durable-floor.ts on a copy of the same keygate file, with or without);
//                 bare+duties: with keygate's duties on a bare Bun.serve (verify, forward-auth);
//                 bare+rules: that, reading the verify body under keygate's body rules as keygate does
//   a directory   a keygate checkout, from source (its src/cli.ts serve)
//   a file        a keygate binary (`serve`)
// and VAR=value settings for that server (e.g. KEY_CACHE_SECONDS=3600: no round falls on the key
// cache's refresh of the 10,000 keys in rotation). KEYS= is not passed on: it picks the 10,000 keys a
// keygate's verify is driven with: plain (the default), limited (each with a rate limit no load reaches:
// what counting costs), permissions (each holding the bench's 20 permissions) or asked (those keys
// asked the bench's 5-name query: what a query costs), e.g.
//   bun bench/cpu-per-request.ts verify --paired ceiling plain=dist/keygate limited=dist/keygate,KEYS=limited
//   bun bench/cpu-per-request.ts verify held=dist/keygate,KEYS=permissions asked=dist/keygate,KEYS=asked
// Example, a change against main:
//   git worktree add /tmp/before main
//   flock /tmp/keygate-load.lock bun bench/cpu-per-request.ts verify before=/tmp/before after=. ceiling floor
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { createJwtAuthority } from '../src/auth/jwt';
import { systemClock } from '../src/core/clock';
import { BENCH_PERMISSIONS, BENCH_PERMISSIONS_QUERY, BENCH_RATE_LIMIT } from './cases';
import { cpuUs } from './process-cpu';
import { seedKeys, verifyKeySpec } from './seed';
import { type WrkRun, wrkAlongside, wrkOnce } from './wrk';

const KINDS = ['verify', 'forward-auth', 'create', 'auth-failure'] as const;
type Kind = (typeof KINDS)[number];
const USAGE =
  'usage: cpu-per-request.ts <verify|forward-auth|auth-failure|create> [--rounds N] [--seconds S] [--fresh W] [--paired] [name=]server[,VAR=value...] ...';

const args = process.argv.slice(2);
const kind = args.shift() as Kind;
let rounds = 10;
let seconds = 1;
let fresh: number | undefined;
let paired = false;
const specs: string[] = [];
while (args.length > 0) {
  const arg = args.shift() as string;
  if (arg === '--rounds') rounds = Number(args.shift());
  else if (arg === '--seconds') seconds = Number(args.shift());
  else if (arg === '--fresh') fresh = Number(args.shift());
  else if (arg === '--paired') paired = true;
  else specs.push(arg);
}
if (
  !KINDS.includes(kind) ||
  specs.length === 0 ||
  !(rounds >= 1) ||
  !(seconds >= 1) ||
  (fresh !== undefined && !(fresh >= 1)) ||
  (paired && (kind === 'create' || specs.filter((spec) => spec.split(',')[0] === 'ceiling').length !== 1))
)
  throw new Error(USAGE);

const dir = mkdtempSync(join(tmpdir(), 'keygate-cpu-'));
const template = join(dir, 'keys.db');
const bodies: string[] = [];
const limitedBodies: string[] = [];
const heldBodies: string[] = [];
const askedBodies: string[] = [];
const basics: string[] = [];
const wrongSecrets: string[] = [];
seedKeys(template, [
  verifyKeySpec({
    onKey(id, secret) {
      bodies.push(JSON.stringify({ key: id, secret }));
      basics.push(`Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`);
      const wrong = randomBytes(32).toString('base64url');
      wrongSecrets.push(`Basic ${Buffer.from(`${id}:${wrong}`).toString('base64')}`);
    },
  }),
  verifyKeySpec({
    ratelimit: BENCH_RATE_LIMIT,
    onKey: (id, secret) => limitedBodies.push(JSON.stringify({ key: id, secret })),
  }),
  verifyKeySpec({
    permissions: BENCH_PERMISSIONS,
    onKey(id, secret) {
      heldBodies.push(JSON.stringify({ key: id, secret }));
      askedBodies.push(JSON.stringify({ key: id, secret, permissions: BENCH_PERMISSIONS_QUERY }));
    },
  }),
]);
// Creates are made by 1000 users with tokens of one secret that every server is given.
const jwtSecret = randomBytes(40).toString('base64url');
const jwt = createJwtAuthority({ secret: jwtSecret, clock: systemClock });
const bearers: string[] = [];
for (let user = 1; user <= 1000; user++) {
  bearers.push(`Bearer ${await jwt.sign({ sub: user, level: 8, ttlSeconds: 7200 })}`);
}
/** The verify bodies of each KEYS= setting. */
const keyBodyFiles = {
  plain: join(dir, 'bodies.txt'),
  limited: join(dir, 'limited-bodies.txt'),
  permissions: join(dir, 'held-bodies.txt'),
  asked: join(dir, 'asked-bodies.txt'),
} as const;
const basicFile = join(dir, 'basics.txt');
const bearerFile = join(dir, 'bearers.txt');
const wrongSecretFile = join(dir, 'wrong-secrets.txt');
writeFileSync(keyBodyFiles.plain, `${bodies.join('\n')}\n`);
writeFileSync(keyBodyFiles.limited, `${limitedBodies.join('\n')}\n`);
writeFileSync(keyBodyFiles.permissions, `${heldBodies.join('\n')}\n`);
writeFileSync(keyBodyFiles.asked, `${askedBodies.join('\n')}\n`);
writeFileSync(basicFile, `${basics.join('\n')}\n`);
writeFileSync(bearerFile, `${bearers.join('\n')}\n`);
writeFileSync(wrongSecretFile, `${wrongSecrets.join('\n')}\n`);

/** What wrk runs against a server: a script of bench/lua, the URL, the script's arguments. */
type Load = {
  script: string;
  url: string;
  args: string[];
  /** Every answer is meant to be a 403 (auth-failure): not worth a warning. */
  refused?: true;
};
type Server = {
  name: string;
  what: string;
  settings: Record<string, string>;
  port: number;
  db: string;
  child: Subprocess;
  url: string;
  load: Load;
  cpu: number[];
  rps: number[];
  /** --paired: each window's req/s ÷ the ceiling's, and the ceiling's CPU per request ÷ this one's. */
  beside: { rps: number[]; cost: number[] };
};

const servers: Server[] = specs.map((spec, index) => {
  const [head = '', ...pairs] = spec.split(',');
  const settings = Object.fromEntries(pairs.map((setting) => setting.split('=', 2)));
  const keys = (settings.KEYS ?? 'plain') as keyof typeof keyBodyFiles;
  if (!(keys in keyBodyFiles)) throw new Error(`KEYS=${keys}: not one of ${Object.keys(keyBodyFiles)}`);
  delete settings.KEYS;
  const equals = head.indexOf('=');
  const what = equals === -1 ? head : head.slice(equals + 1);
  const name = equals === -1 ? what : head.slice(0, equals);
  const port = 4600 + (process.pid % 300) + index;
  const db = join(dir, `${index}.db`);
  const url = `http://127.0.0.1:${port}`;
  const server = {
    name,
    what,
    settings,
    port,
    db,
    url,
    load: loadOf(what, url, keyBodyFiles[keys]),
    cpu: [],
    rps: [],
    beside: { rps: [], cost: [] },
  };
  return { ...server, child: start(server) };
});

/** Starts the server on a fresh copy of the template database. */
function start({ what, settings, port, db }: Omit<Server, 'child'>): Subprocess {
  copyFileSync(template, db);
  for (const suffix of ['-wal', '-shm']) rmSync(`${db}${suffix}`, { force: true });
  return Bun.spawn(['taskset', '-c', '0', ...commandOf(what, port, db)], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: db,
      JWT_SECRET: jwtSecret,
      ...settings,
    },
    stdout: Bun.file(`${db}.log`),
    stderr: 'inherit',
  });
}

function commandOf(what: string, port: number, db: string): string[] {
  if (what === 'ceiling') return ['bun', join(import.meta.dir, 'ceiling.ts')];
  if (kind === 'create' && (what === 'floor' || what === 'floor+duties')) {
    const durable = [join(import.meta.dir, 'durable-floor.ts'), String(port), 'full', db];
    return ['bun', ...durable, ...(what === 'floor' ? [] : ['duties'])];
  }
  const floor = join(import.meta.dir, 'verify-floor.ts');
  if (what === 'floor') return ['bun', floor, String(port), db];
  if (what === 'floor+duties') return ['bun', floor, String(port), db, 'duties'];
  if (what === 'bare+duties' && kind !== 'create') return ['bun', floor, String(port), db, 'duties', 'bare'];
  if (what === 'bare+rules' && kind === 'verify')
    return ['bun', floor, String(port), db, 'duties', 'bare', 'rules'];
  if (existsSync(what) && statSync(what).isDirectory())
    return ['bun', join(resolve(what), 'src', 'cli.ts'), 'serve'];
  if (existsSync(what)) return [resolve(what), 'serve'];
  throw new Error(`no such server: ${what}\n${USAGE}`);
}

function loadOf(what: string, url: string, verifyBodies: string): Load {
  if (kind === 'create') return { script: 'create.lua', url, args: ['/apikeys/jwt', bearerFile] };
  if (what === 'ceiling') {
    return kind !== 'forward-auth'
      ? { script: 'create.lua', url, args: ['/apikeys/jwt', basicFile] }
      : { script: 'get.lua', url: `${url}/health`, args: [] };
  }
  // The bench's 403 case: a create with a key whose secret is wrong.
  if (kind === 'auth-failure') {
    return { script: 'create.lua', url, args: ['/apikeys/key', wrongSecretFile], refused: true };
  }
  return kind === 'verify'
    ? { script: 'post-body.lua', url, args: ['/apikeys/verify', verifyBodies] }
    : { script: 'authorized-get.lua', url, args: ['/forward-auth', basicFile] };
}

/** One wrk run against the server; its figures. */
const drive = ({ load }: Server, secs: number) => wrkOnce(load.url, load.script, load.args, secs);

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

/** With --fresh, restarts the server and warms it up; else it stays up (warmed once at the start). */
async function restart(server: Server): Promise<void> {
  if (fresh === undefined || server.what === 'ceiling') return;
  server.child.kill('SIGTERM');
  await server.child.exited;
  server.child = start(server);
  await waitForAnswer(server.url);
  drive(server, fresh);
}

/** One window of the server's load (with --paired, the ceiling's at the same time); figures kept. */
async function measure(server: Server, ceiling: Server | undefined): Promise<void> {
  const driven = ceiling === undefined ? [server] : [server, ceiling];
  const before = driven.map(({ child }) => cpuUs(child.pid));
  const runs = await Promise.all(
    driven.map(({ load }) => wrkAlongside(load.url, load.script, load.args, seconds)),
  );
  driven.forEach((each, i) => {
    const run = runs[i] as WrkRun;
    if (run.non2xx > 0 && !each.load.refused) console.log(`${each.name}: ${run.non2xx} answers were not 2xx`);
    each.cpu.push((cpuUs(each.child.pid) - (before[i] as number)) / run.requests);
    each.rps.push(run.requests / (run.durationUs / 1e6));
  });
  if (ceiling === undefined) return;
  server.beside.rps.push((server.rps.at(-1) as number) / (ceiling.rps.at(-1) as number));
  server.beside.cost.push((ceiling.cpu.at(-1) as number) / (server.cpu.at(-1) as number));
}

const spread = (values: number[]) =>
  `×${median(values).toFixed(3)} (${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)})`;

try {
  for (const server of servers) await waitForAnswer(server.url);
  // Warm-up, for the servers that stay up (the others are warmed up as each starts anew).
  for (const server of servers) if (fresh === undefined || server.what === 'ceiling') drive(server, 2);
  const ceiling = paired ? servers.find(({ what }) => what === 'ceiling') : undefined;
  const measured = servers.filter((server) => server !== ceiling);
  for (let round = 0; round < rounds; round++) {
    // Each round starts one server later, so every server takes every place in the order alike (the
    // place moves CPU per request by ~6%: the server driven just before is still finishing its work).
    for (let place = 0; place < measured.length; place++) {
      const server = measured[(round + place) % measured.length] as Server;
      await restart(server);
      await measure(server, ceiling);
    }
  }
  const [first] = servers as [Server];
  for (const server of servers) {
    const ratios =
      ceiling !== undefined
        ? server === ceiling
          ? ''
          : `  beside the ceiling, same windows: req/s ${spread(server.beside.rps)}, ` +
            `the ceiling's CPU per request ÷ its own ${spread(server.beside.cost)}`
        : server === first
          ? ''
          : `  ÷ ${first.name}: req/s ×${median(server.rps.map((rps, i) => rps / (first.rps[i] as number))).toFixed(3)}, ` +
            `CPU ×${median(server.cpu.map((cpu, i) => cpu / (first.cpu[i] as number))).toFixed(3)}`;
    console.log(
      `${server.name}: ${median(server.cpu).toFixed(2)} µs CPU/request, ${Math.round(median(server.rps))} req/s` +
        ` (medians of ${server.rps.length} windows)${ratios}`,
    );
  }
} finally {
  for (const server of servers) server.child.kill('SIGTERM');
  for (const server of servers) await server.child.exited;
  rmSync(dir, { recursive: true, force: true });
}

async function waitForAnswer(url: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const answered = await fetch(`${url}/health`).then(
      (response) => response.status < 500,
      () => false,
    );
    if (answered) return;
    await Bun.sleep(10);
  }
  throw new Error(`${url} did not answer within 10 s`);
}
