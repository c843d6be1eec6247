// CPU µs per verify or forward-auth check of a plain key (no limit, credits, policy or permissions),
// in process through `keygate.handle`: no socket, no wrk, so the host's noise is mostly what other
// processes take from this one's core, which CPU time (not wall time) leaves out. Each checkout runs
// in a child process of its own, pinned to CPU 0, the checkouts taking turns round after round; each
// child builds keygate from that checkout's source on a fresh :memory: database (its own migrations),
// creates its keys over HTTP, warms up, then times windows: the median window, and all of them
// together (which holds the usage flushes, every USAGE_FLUSH_SECONDS, that a median leaves out).
//   flock /tmp/keygate-load.lock bun bench/in-process.ts [verify|forward-auth] --rounds 5 /tmp/before .
// KEY_CACHE_SECONDS is 3600 unless set (10, keygate's default, puts the key cache's refresh of every
// key in the windows, as served); the usage flush keeps its timer (USAGE_FLUSH_SECONDS), as served.
// --together: one child (pinned to CPU 0) holds every checkout's keygate at once and drives them in
// turn, batches of --batch checks, for --pairs turns each: what slows the host then slows each alike,
// and the median of each batch's ratio to the first checkout's in the same turn holds still to within
// 1-3 % (two worktrees of one commit measured 0.909 and 0.908 of an older one, and 0.927 and 0.900),
// where separate children spread by 10 % and more.
//   flock /tmp/keygate-load.lock bun bench/in-process.ts verify --together /tmp/before /tmp/copy .
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const KEYS = 10_000;
const WARMUP = 150_000;
const WINDOW = 50_000;
const WINDOWS = 10;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '5' },
    child: { type: 'string' },
    together: { type: 'boolean', default: false },
    pairs: { type: 'string', default: '60' },
    batch: { type: 'string', default: '5000' },
  },
});

type Kind = 'verify' | 'forward-auth';
/** A child's figures, CPU µs a check: its median window, and every window together. */
type Figures = { medianUs: number; overallUs: number };

if (values.child !== undefined) {
  await child(resolve(values.child), positionals[0] as Kind);
} else if (values.together && process.env.KEYGATE_IN_PROCESS_TOGETHER === '1') {
  await together(positionals[0] as Kind, positionals.slice(1));
} else if (values.together) {
  const run = Bun.spawnSync(['taskset', '-c', '0', 'bun', import.meta.path, ...process.argv.slice(2)], {
    stdout: 'inherit',
    stderr: 'inherit',
    env: {
      ...process.env,
      KEYGATE_IN_PROCESS_TOGETHER: '1',
      KEY_CACHE_SECONDS: process.env.KEY_CACHE_SECONDS ?? '3600',
    },
  });
  process.exitCode = run.exitCode ?? 1;
} else {
  await parent();
}

async function parent(): Promise<void> {
  const [kind, ...checkouts] = positionals as [Kind, ...string[]];
  if ((kind !== 'verify' && kind !== 'forward-auth') || checkouts.length === 0) {
    throw new Error('usage: bun bench/in-process.ts verify|forward-auth [--rounds N] <checkout> ...');
  }
  const byCheckout = new Map<string, Figures[]>(checkouts.map((c) => [c, []]));
  const rounds = Number(values.rounds);
  for (let round = 0; round < rounds; round++) {
    // Each round starts one checkout later, so each takes every place in the order alike.
    for (let i = 0; i < checkouts.length; i++) {
      const checkout = checkouts[(i + round) % checkouts.length] as string;
      const run = Bun.spawnSync(['taskset', '-c', '0', 'bun', import.meta.path, '--child', checkout, kind], {
        stderr: 'inherit',
        env: { ...process.env, KEY_CACHE_SECONDS: process.env.KEY_CACHE_SECONDS ?? '3600' },
      });
      const line = run.stdout.toString().trim().split('\n').at(-1) ?? '';
      if (run.exitCode !== 0 || !line.startsWith('{')) throw new Error(`${checkout}: ${line}`);
      const figures = JSON.parse(line) as Figures;
      byCheckout.get(checkout)?.push(figures);
      console.log(
        `round ${round + 1} ${checkout}: ${figures.medianUs.toFixed(2)} µs CPU a ${kind} (median window), ${figures.overallUs.toFixed(2)} overall`,
      );
    }
  }
  const first = byCheckout.get(checkouts[0] as string) as Figures[];
  for (const [checkout, figures] of byCheckout) {
    for (const which of ['medianUs', 'overallUs'] as const) {
      const us = figures.map((f) => f[which]);
      // Each round's speed ÷ the first checkout's in the same round (its CPU per check ÷ this one's).
      const ratios = us.map((value, i) => ((first[i] as Figures)[which] as number) / value);
      console.log(
        `${checkout} ${which === 'medianUs' ? 'median window' : 'overall'}: ${median(us).toFixed(2)} µs (rounds ${us.map((f) => f.toFixed(1)).join(', ')}); ` +
          `speed ÷ ${checkouts[0]}: ${median(ratios).toFixed(3)} (rounds ${ratios.map((r) => r.toFixed(3)).join(', ')})`,
      );
    }
  }
}

/** A keygate from `checkout`'s source on :memory:, its keys made over HTTP, ready to drive. */
async function prepare(checkout: string, kind: Kind) {
  const { loadConfig } = await import(join(checkout, 'src/config.ts'));
  const { createKeygate } = await import(join(checkout, 'src/keygate.ts'));
  const log = await import(join(checkout, 'src/core/log.ts')).catch(
    () => import(join(checkout, 'src/log.ts')),
  );
  const config = loadConfig({
    DATABASE_URL: ':memory:',
    JWT_SECRET: 'in-process-secret-that-is-at-least-32-bytes',
    KEY_CACHE_SECONDS: process.env.KEY_CACHE_SECONDS ?? '10',
  });
  // The log line is built and written as served; only its bytes go nowhere.
  const logger = log.createLogger(config.logLevel, () => {});
  const keygate = await createKeygate(config, {
    jwtSecret: 'in-process-secret-that-is-at-least-32-bytes',
    logger,
  });
  const base = `http://localhost${config.basePath}`;
  const bearers: string[] = [];
  for (let user = 1; user <= 100; user++) {
    bearers.push(`Bearer ${await keygate.jwt.sign({ sub: user, level: 8, ttlSeconds: 7200 })}`);
  }
  const bodies: string[] = [];
  const basics: string[] = [];
  for (let i = 0; i < KEYS; i += 500) {
    await Promise.all(
      Array.from({ length: 500 }, async (_, j) => {
        const response = await keygate.handle(
          new Request(`${base}/apikeys/jwt`, {
            method: 'POST',
            headers: {
              authorization: bearers[(i + j) % bearers.length] as string,
              'content-type': 'application/json',
            },
            body: JSON.stringify({ name: 'in-process', level: 3, expiresIn: 86_400 }),
          }),
        );
        if (response.status !== 201) throw new Error(`create: ${response.status} ${await response.text()}`);
        const { apikey } = (await response.json()) as { apikey: { key: string; secret: string } };
        bodies.push(JSON.stringify({ key: apikey.key, secret: apikey.secret }));
        basics.push(`Basic ${Buffer.from(`${apikey.key}:${apikey.secret}`).toString('base64')}`);
      }),
    );
  }
  const request =
    kind === 'verify'
      ? (n: number) =>
          new Request(`${base}/apikeys/verify`, {
            method: 'POST',
            // With its length, as wrk and most clients send it: the body is read whole, not streamed.
            headers: {
              'content-type': 'application/json',
              'content-length': String((bodies[n % KEYS] as string).length),
            },
            body: bodies[n % KEYS],
          })
      : (n: number) =>
          new Request(`${base}/forward-auth`, { headers: { authorization: basics[n % KEYS] as string } });
  const first = await keygate.handle(request(0));
  const answer = await first.text();
  if (first.status !== 200 || (kind === 'verify' && !answer.includes('"VALID"'))) {
    throw new Error(`first ${kind}: ${first.status} ${answer}`);
  }
  let n = 0;
  const drive = async (count: number) => {
    for (let i = 0; i < count; i++) {
      const response = await keygate.handle(request(n++));
      await response.arrayBuffer();
    }
  };
  return { drive, close: () => keygate.close() };
}

async function child(checkout: string, kind: Kind): Promise<void> {
  const { drive, close } = await prepare(checkout, kind);
  await drive(WARMUP);
  const windows: Array<{ cpuUs: number }> = [];
  for (let w = 0; w < WINDOWS; w++) {
    const cpu = process.cpuUsage();
    await drive(WINDOW);
    const used = process.cpuUsage(cpu);
    windows.push({
      cpuUs: (used.user + used.system) / WINDOW,
    });
  }
  await close();
  const figures: Figures = {
    medianUs: median(windows.map((w) => w.cpuUs)),
    overallUs: windows.reduce((sum, w) => sum + w.cpuUs, 0) / windows.length,
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
}

/** Every checkout in this one process, driven in turn: CPU µs per check, and speed ÷ the first. */
async function together(kind: Kind, checkouts: string[]): Promise<void> {
  if ((kind !== 'verify' && kind !== 'forward-auth') || checkouts.length === 0) {
    throw new Error('usage: bun bench/in-process.ts verify|forward-auth --together <checkout> ...');
  }
  const pairs = Number(values.pairs);
  const batch = Number(values.batch);
  const keygates = [];
  for (const checkout of checkouts) keygates.push(await prepare(resolve(checkout), kind));
  for (const keygate of keygates) await keygate.drive(WARMUP);
  const us: number[][] = keygates.map(() => []);
  for (let turn = 0; turn < pairs; turn++) {
    // Each turn starts with another checkout, so each takes every place in the order alike.
    for (let i = 0; i < keygates.length; i++) {
      const at = (i + turn) % keygates.length;
      const cpu = process.cpuUsage();
      await keygates[at]?.drive(batch);
      const used = process.cpuUsage(cpu);
      us[at]?.push((used.user + used.system) / batch);
    }
  }
  for (const keygate of keygates) await keygate.close();
  const first = us[0] as number[];
  checkouts.forEach((checkout, i) => {
    const mine = us[i] as number[];
    const ratios = mine.map((value, turn) => (first[turn] as number) / value);
    console.log(
      `${checkout}: ${median(mine).toFixed(2)} µs CPU a ${kind} (median of ${pairs} batches of ${batch}); speed ÷ ${checkouts[0]}: ${median(ratios).toFixed(3)}`,
    );
  });
}

function median(list: number[]): number {
  const sorted = [...list].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}
