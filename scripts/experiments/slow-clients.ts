// Slow clients: 1,000 connections that sit idle or trickle request headers a byte at a time, held
// open (reopened as the server closes them) while a normal client runs.
//   flock /tmp/keygate-load.lock bun scripts/experiments/slow-clients.ts [--connections 1000] [--seconds 30]
// Reports the normal client's p50/p99 without and with them (pass: p99 within 2×), and how long the
// server let each slow connection live (pass: every one closed by the server, none past
// HEADER_TIMEOUT_SECONDS + 5 s: the timer that closes them ticks every few seconds).
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Socket } from 'bun';
import { createMixedLoad } from './support/load';
import { flag, percentile, round, startKeygate, stopGracefully, tempDir } from './support/server';

const connections = flag('connections', 1000);
const seconds = flag('seconds', 30);
const CLIENT_CONCURRENCY = 8;
const TRICKLE_EVERY_MS = 500;
// These connections never finish their headers: Bun closes them on its own fixed timer (~10 s), not
// on IDLE_TIMEOUT_SECONDS, which governs keep-alive connections between requests.
const HEADER_TIMEOUT_SECONDS = 10;
const CLOSE_LIMIT_S = HEADER_TIMEOUT_SECONDS + 5;

// Both ends of 1,000 connections plus the normal client: make sure the descriptors are there.
const limit = Number(Bun.spawnSync(['sh', '-c', 'ulimit -n']).stdout.toString().trim());
const needed = connections * 2 + 512;
if (Number.isFinite(limit) && limit < needed && !process.env.KEYGATE_SLOW_RAISED) {
  const argv = process.argv.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
  const rerun = Bun.spawnSync(['sh', '-c', `ulimit -n ${needed} && exec ${argv}`], {
    env: { ...process.env, KEYGATE_SLOW_RAISED: '1' },
    stdout: 'inherit',
    stderr: 'inherit',
  });
  process.exit(rerun.exitCode ?? 1);
}

const dir = tempDir('slow');
const server = await startKeygate({ databaseUrl: join(dir, 'keygate.db') });
const next = await createMixedLoad(server.base);

async function normalClient(
  durationS: number,
): Promise<{ requests: number; errors: number; p50: number; p99: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const until = performance.now() + durationS * 1000;
  await Promise.all(
    Array.from({ length: CLIENT_CONCURRENCY }, async () => {
      while (performance.now() < until) {
        const outcome = await next(500);
        latencies.push(outcome.ms);
        if (!outcome.ok) errors++;
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    errors,
    p50: round(percentile(latencies, 50)),
    p99: round(percentile(latencies, 99)),
  };
}

// ---------------------------------------------------------------- the slow connections

const HEADERS = `POST /apikeys/jwt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Padding: ${'p'.repeat(4000)}\r\n`;
type Slow = { kind: 'idle' | 'trickle'; opened: number; sent: number; socket?: Socket<undefined> };
const lifetimes: Record<Slow['kind'], number[]> = { idle: [], trickle: [] };
let holding = true;
let open = 0;
let connectFailures = 0;

async function openSlow(kind: Slow['kind']): Promise<void> {
  const slow: Slow = { kind, opened: performance.now(), sent: 0 };
  try {
    slow.socket = await Bun.connect({
      hostname: '127.0.0.1',
      port: server.port,
      socket: {
        data() {},
        error() {},
        close() {
          open--;
          lifetimes[kind].push((performance.now() - slow.opened) / 1000);
          if (holding) void openSlow(kind);
        },
      },
    });
    open++;
    slow.opened = performance.now();
    if (kind === 'trickle') trickle(slow);
  } catch {
    connectFailures++;
    if (holding) setTimeout(() => void openSlow(kind), 100);
  }
}

function trickle(slow: Slow): void {
  const timer = setInterval(() => {
    const socket = slow.socket;
    if (socket?.readyState !== 1 || slow.sent >= HEADERS.length) return clearInterval(timer);
    socket.write(HEADERS[slow.sent++] as string);
  }, TRICKLE_EVERY_MS);
}

// ---------------------------------------------------------------- run

await normalClient(5); // warm-up, fills the key pool
const without = await normalClient(seconds);
console.log('without slow connections:', JSON.stringify(without));

const openedAt = performance.now();
await Promise.all(Array.from({ length: connections }, (_, i) => openSlow(i % 2 === 0 ? 'idle' : 'trickle')));
console.log(`${open} slow connections open after ${round((performance.now() - openedAt) / 1000)} s`);
const withSlow = await normalClient(seconds);
const openDuring = open;
console.log('with slow connections:   ', JSON.stringify(withSlow), `(${openDuring} slow open at the end)`);

// Stop reopening; every connection still open must be closed by the server within the limit.
holding = false;
const waitUntil = performance.now() + CLOSE_LIMIT_S * 1000;
while (open > 0 && performance.now() < waitUntil) await Bun.sleep(100);
const leftOpen = open;

const exit = await stopGracefully(server);
rmSync(dir, { recursive: true, force: true });

const summary = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    closedByServer: sorted.length,
    min: round(sorted[0] ?? Number.NaN, 1),
    median: round(percentile(sorted, 50), 1),
    max: round(sorted.at(-1) ?? Number.NaN, 1),
  };
};
const ratio = withSlow.p99 / without.p99;
const report = {
  connections,
  headerTimeoutSeconds: HEADER_TIMEOUT_SECONDS,
  normalClient: { without, with: withSlow, p99Ratio: round(ratio) },
  slowConnectionLifetimeSeconds: { idle: summary(lifetimes.idle), trickle: summary(lifetimes.trickle) },
  heldOpenDuringRun: openDuring,
  leftOpenAfterWaiting: leftOpen,
  connectFailures,
  gracefulStopExitCode: exit,
};
console.log(JSON.stringify(report, null, 2));
const longest = Math.max(...lifetimes.idle, ...lifetimes.trickle);
const pass =
  ratio <= 2 && withSlow.errors === 0 && without.errors === 0 && leftOpen === 0 && longest <= CLOSE_LIMIT_S;
process.exit(pass ? 0 : 1);
