// Profiles one load case: keygate from source under `bun --cpu-prof` on CPU 0, wrk on CPU 1, then a
// summary of where the CPU went (self and inclusive time per function). Run it under the load lock:
//   flock /tmp/keygate-load.lock bun bench/profile.ts [create-jwt|create-key|auth-fail|delete-jwt|delete-key|verify-key|forward-auth] [seconds]
// KEY_CACHE_SECONDS (default 10, keygate's) is passed through: 3600 keeps the cache's refresh out of a verify profile.
// PROFILE_RATELIMIT=1 gives the verified keys a rate limit (never reached).

import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Subprocess } from 'bun';
import { createJwtAuthority } from '../src/auth/jwt';
import { systemClock } from '../src/core/clock';
import { BENCH_RATE_LIMIT } from './cases';
import { seedKeys } from './seed';
import { wrkOnce } from './wrk';

const USERS = 1000;
const DAY_MS = 86_400_000;
const caseName = process.argv[2] ?? 'create-jwt';
const seconds = Number(process.argv[3] ?? 5);
const root = join(import.meta.dir, '..');
const dir = join(import.meta.dir, '.run', `profile-${process.pid}`);
mkdirSync(dir, { recursive: true });
const secret = randomBytes(48).toString('base64url');
let server: Subprocess | undefined;

function lines(name: string, values: string[]): string {
  const path = join(dir, name);
  writeFileSync(path, `${values.join('\n')}\n`, { mode: 0o600 });
  return path;
}

async function main(): Promise<void> {
  Bun.spawnSync(['taskset', '-a', '-pc', '1', String(process.pid)], { stdout: 'ignore' });
  const db = join(dir, 'keygate.db');
  const basics: string[] = [];
  const wrong: string[] = [];
  const verifyBodies: string[] = [];
  const toDelete: string[] = [];
  seedKeys(db, [
    {
      count: USERS,
      userOf: (i) => i + 1,
      level: 8,
      expiresAt: Date.now() + DAY_MS,
      name: 'caller',
      // PROFILE_RATELIMIT=1: each of these keys has a rate limit too high to refuse (the limiter's cost).
      ...(process.env.PROFILE_RATELIMIT === '1' ? { ratelimit: BENCH_RATE_LIMIT } : {}),
      onKey(id, key) {
        basics.push(`Basic ${Buffer.from(`${id}:${key}`).toString('base64')}`);
        verifyBodies.push(JSON.stringify({ key: id, secret: key }));
        wrong.push(
          `Basic ${Buffer.from(`${id}:${randomBytes(32).toString('base64url')}`).toString('base64')}`,
        );
      },
    },
    {
      // PROFILE_SEED: this many more live keys, spread over ten times as many users, as `bench --seed`.
      count: Number(process.env.PROFILE_SEED ?? 0),
      userOf: (i) => (i % (USERS * 10)) + 1,
      level: 4,
      expiresAt: Date.now() + DAY_MS,
      name: 'seeded live',
    },
    {
      count: caseName.startsWith('delete') ? 60_000 * seconds : 0,
      userOf: (i) => (i % USERS) + 1,
      level: 1,
      expiresAt: Date.now() + DAY_MS,
      name: 'to delete',
      onKey: (id) => toDelete.push(id),
    },
  ]);
  const jwt = createJwtAuthority({ secret, clock: systemClock });
  const bearers: string[] = [];
  for (let user = 1; user <= USERS; user++) {
    bearers.push(`Bearer ${await jwt.sign({ sub: user, level: 8, ttlSeconds: 3600 })}`);
  }
  const bearerFile = lines('bearer.txt', bearers);
  const basicFile = lines('basic.txt', basics);
  const loads: Record<string, [string, string[]]> = {
    'create-jwt': ['create.lua', ['/apikeys/jwt', bearerFile]],
    'create-key': ['create.lua', ['/apikeys/key', basicFile]],
    'auth-fail': ['create.lua', ['/apikeys/key', lines('wrong.txt', wrong)]],
    'delete-jwt': ['delete.lua', ['jwt', lines('delete.txt', toDelete), bearerFile]],
    'delete-key': ['delete.lua', ['key', lines('delete.txt', toDelete), basicFile]],
    'verify-key': ['post-body.lua', ['/apikeys/verify', lines('verify.txt', verifyBodies)]],
    'forward-auth': ['authorized-get.lua', ['/forward-auth', basicFile]],
  };
  const load = loads[caseName];
  if (!load) throw new Error(`unknown case ${caseName}; one of ${Object.keys(loads).join(', ')}`);
  const port = 3900 + (process.pid % 90);
  server = Bun.spawn(
    [
      'taskset',
      '-c',
      '0',
      'bun',
      // PROFILE_PRELOAD: a module to load first, e.g. bench/commit-stats.ts (batch sizes, COMMIT time).
      ...(process.env.PROFILE_PRELOAD ? ['--preload', process.env.PROFILE_PRELOAD] : []),
      '--cpu-prof',
      '--cpu-prof-dir',
      dir,
      join(root, 'src', 'cli.ts'),
      'serve',
    ],
    {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_URL: db,
        JWT_SECRET: secret,
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
        KEY_CACHE_SECONDS: process.env.KEY_CACHE_SECONDS ?? '10',
      },
      stdout: Bun.file(join(dir, 'server.log')),
      stderr: 'inherit',
    },
  );
  for (let i = 0; i < 1000; i++) {
    const up = await fetch(`http://127.0.0.1:${port}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    await Bun.sleep(10);
  }
  const [script, args] = load;
  process.stdout.write(`${wrkOnce(`http://127.0.0.1:${port}`, script, args, seconds).line}\n`);
  server.kill('SIGTERM');
  await server.exited;
  const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'));
  if (!file) throw new Error('no .cpuprofile written');
  summarize(JSON.parse(readFileSync(join(dir, file), 'utf8')));
  const kept = join(import.meta.dir, '.run', `${caseName}-${Date.now()}.cpuprofile`);
  writeFileSync(kept, readFileSync(join(dir, file)));
  process.stdout.write(`profile kept in ${kept}\n`);
}

type ProfileNode = {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
};

function summarize(profile: { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] }): void {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const label = (node: ProfileNode) => {
    const url = node.callFrame.url.replace(/^.*node_modules\//, '').replace(root, '');
    return `${node.callFrame.functionName || '(anonymous)'} ${url}:${node.callFrame.lineNumber + 1}`;
  };
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  const walk = (id: number, onStack: Set<string>): number => {
    const node = byId.get(id) as ProfileNode;
    let sum = selfUs.get(id) ?? 0;
    const name = label(node);
    self.set(name, (self.get(name) ?? 0) + sum);
    const nested = new Set(onStack).add(name);
    for (const child of node.children ?? []) sum += walk(child, nested);
    if (!onStack.has(name)) inclusive.set(name, (inclusive.get(name) ?? 0) + sum);
    return sum;
  };
  total = walk(profile.nodes[0]?.id as number, new Set());
  const idle = [...self].filter(([name]) => name.startsWith('(idle)')).reduce((a, [, v]) => a + v, 0);
  const busy = total - idle;
  const table = (title: string, map: Map<string, number>, count: number) => {
    process.stdout.write(`\n${title} (% of busy time ${Math.round(busy / 1000)} ms)\n`);
    for (const [name, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, count)) {
      if (name.startsWith('(idle)') || name.startsWith('(root)')) continue;
      process.stdout.write(`${((100 * us) / busy).toFixed(1).padStart(6)}%  ${name}\n`);
    }
  };
  table('self', self, 40);
  table('inclusive', inclusive, 60);
}

main()
  .catch((error: unknown) => {
    process.stderr.write(`profile: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exitCode = 1;
  })
  .finally(() => {
    server?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    process.exit();
  });
