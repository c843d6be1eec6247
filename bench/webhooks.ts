// What webhooks cost: creates with one subscribed endpoint ÷ creates with none, in one run
// on one keygate, rounds interleaved (the endpoint enabled, then disabled, by PATCH); then a burst of
// creates whose key.created messages go to a local receiver: the time to the last message, and the
// delay from each create's acknowledgement (just after its commit) to its message's arrival.
//   flock /tmp/keygate-load.lock bun bench/webhooks.ts [--engine sqlite|postgres] [--seconds 5]
//     [--rounds 3] [--burst 10000] [--concurrency 64]
// keygate runs as dist/keygate (or from source when it is missing, or with --source), wrk on CPU 1;
// the receiver and the burst's clients run in this process.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crashDatabase } from '../scripts/experiments/support/crash-database';
import {
  BINARY,
  flag,
  jwt,
  percentile,
  startKeygate,
  stopGracefully,
} from '../scripts/experiments/support/server';
import { wrkOnce } from './wrk';

const seconds = flag('seconds', 5);
const rounds = flag('rounds', 3);
const burst = flag('burst', 10_000);
const concurrency = flag('concurrency', 64);
const engineAt = process.argv.indexOf('--engine');
const engine = engineAt === -1 ? 'sqlite' : process.argv[engineAt + 1];
if (engine !== 'sqlite' && engine !== 'postgres') throw new Error('--engine is sqlite or postgres');
const fromSource = process.argv.includes('--source') || !(await Bun.file(BINARY).exists());

const scratch = mkdtempSync(join(tmpdir(), 'keygate-bench-webhooks-'));
const database = await crashDatabase(engine);
const arrivals = new Map<string, number>();
const receiver = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  async fetch(request) {
    const body = (await request.json()) as { data: { key: string } };
    arrivals.set(body.data.key, performance.now());
    return new Response(null, { status: 204 });
  },
});
const json = { 'content-type': 'application/json' };
const operator = {
  authorization: `Bearer ${await jwt.sign({ sub: 'bench', scope: 'keygate:admin', ttlSeconds: 86_400 })}`,
  ...json,
};
const users = await Promise.all(
  Array.from({ length: 200 }, (_, i) => jwt.sign({ sub: i + 1, ttlSeconds: 86_400 })),
);
const bearerFile = join(scratch, 'bearers.txt');
writeFileSync(bearerFile, users.map((token) => `Bearer ${token}`).join('\n'));

const server = await startKeygate({
  databaseUrl: database.url,
  fromSource,
  env: { WEBHOOK_ALLOW_PRIVATE: 'true', MAX_KEYS_PER_USER: '1000000000', DATABASE_POOL_SIZE: '10' },
});
try {
  const created = await fetch(`${server.base}/admin/webhooks`, {
    method: 'POST',
    headers: operator,
    body: JSON.stringify({ url: `http://127.0.0.1:${receiver.port}/hooks`, events: ['key.created'] }),
  });
  if (created.status !== 201) throw new Error(`endpoint: ${created.status} ${await created.text()}`);
  const { endpoint } = (await created.json()) as { endpoint: { id: string } };
  const subscribe = async (enabled: boolean) => {
    const response = await fetch(`${server.base}/admin/webhooks/${endpoint.id}`, {
      method: 'PATCH',
      headers: operator,
      body: JSON.stringify({ enabled }),
    });
    if (response.status !== 200) throw new Error(`patch: ${response.status}`);
  };
  /** Waits until every message so far has left (no queue carried into the next round). */
  const drained = async () => {
    for (let i = 0; i < 600; i++) {
      const messages = await fetch(`${server.base}/admin/webhooks/${endpoint.id}/messages`, {
        headers: operator,
      });
      const { messages: latest } = (await messages.json()) as { messages: Array<{ status: string }> };
      if (latest.every((m) => m.status !== 'pending')) return;
      await Bun.sleep(100);
    }
  };

  // Part 1: creates/s with none and with one subscribed endpoint, interleaved.
  const rates: Record<'none' | 'one', number[]> = { none: [], one: [] };
  wrkOnce(`${server.base}/apikeys/jwt`, 'create.lua', ['/apikeys/jwt', bearerFile], 2); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (const mode of round % 2 === 0 ? (['none', 'one'] as const) : (['one', 'none'] as const)) {
      await subscribe(mode === 'one');
      const run = wrkOnce(`${server.base}/apikeys/jwt`, 'create.lua', ['/apikeys/jwt', bearerFile], seconds);
      if (run.non2xx > 0) throw new Error(`${run.non2xx} non-2xx answers`);
      rates[mode].push(run.requests / (run.durationUs / 1e6));
      await drained();
    }
  }
  const median = (values: number[]) =>
    [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

  // Part 2: a burst of creates, each message timed from its acknowledgement to its arrival.
  await subscribe(true);
  await drained();
  arrivals.clear();
  const acknowledged = new Map<string, number>();
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < burst) {
        const i = next++;
        const response = await fetch(`${server.base}/apikeys/jwt`, {
          method: 'POST',
          headers: { authorization: `Bearer ${users[i % users.length]}`, ...json },
          body: '{"name":"burst","level":1,"expiresIn":86400}',
        });
        const { apikey } = (await response.json()) as { apikey: { key: string } };
        acknowledged.set(apikey.key, performance.now());
      }
    }),
  );
  const writesDone = performance.now();
  for (let i = 0; i < 1200 && arrivals.size < acknowledged.size; i++) await Bun.sleep(100);
  const lastArrival = Math.max(...[...acknowledged.keys()].map((key) => arrivals.get(key) ?? Number.NaN));
  const delays = [...acknowledged]
    .map(([key, at]) => (arrivals.get(key) ?? Number.NaN) - at)
    .sort((a, b) => a - b);
  const round1 = (value: number) => Math.round(value * 10) / 10;
  console.log(
    JSON.stringify(
      {
        engine,
        keygate: fromSource ? 'source' : 'dist/keygate',
        createsPerSecond: { none: rates.none.map(Math.round), one: rates.one.map(Math.round) },
        ratioOneToNone: Math.round((median(rates.one) / median(rates.none)) * 1000) / 1000,
        burst: {
          events: burst,
          delivered: [...acknowledged.keys()].filter((key) => arrivals.has(key)).length,
          writesSeconds: round1((writesDone - started) / 1000),
          toLastMessageSeconds: round1((lastArrival - started) / 1000),
          afterLastWriteSeconds: round1((lastArrival - writesDone) / 1000),
          delayFromAckMs: {
            p50: round1(percentile(delays, 50)),
            p99: round1(percentile(delays, 99)),
            max: round1(delays.at(-1) as number),
          },
        },
      },
      null,
      2,
    ),
  );
} finally {
  await stopGracefully(server);
  receiver.stop(true);
  await database.destroy();
  rmSync(scratch, { recursive: true, force: true });
}
