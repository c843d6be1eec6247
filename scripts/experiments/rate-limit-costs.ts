// What exact rate limits cost on PostgreSQL, the two ways: one conditional write per decision (the
// keygate_rate_limit function of migration 0003) and leases (a replica reserves a slice of the limit in
// one guarded UPDATE and spends it in memory). Decisions per second and latency per decision, from one
// pool and from two pools (two replicas), on one hot counter and spread over many; each run bounded to
// a few seconds, on a throwaway PostgreSQL on 127.0.0.1 that is stopped at the end. The in-memory
// limiter's figure is the ceiling; a bare round trip and a lease of 1 (a plain guarded UPDATE per
// decision) tell the function's own cost from the round trip's. Limits are set high so every decision is an admission (a write):
// refusals write nothing (a case of their own: limit 1 per hour). Both tables are UNLOGGED (no WAL flush per commit). A replica
// asks for one lease per counter at a time.
//   bun scripts/experiments/rate-limit-costs.ts [--seconds 3] [--inflight 16]
import { parseArgs } from 'node:util';
import type { SQL } from 'bun';
import { openPostgres } from '../../src/db/postgres/open';
import { createPostgresRateLimiter } from '../../src/db/postgres/rate-limits';
import { MemoryRateLimiter } from '../../src/limits/memory-rate-limiter';
import type { CountedLimit } from '../../src/limits/rate-limit';
import { startPostgres } from '../../test/support/postgres';

const { values } = parseArgs({
  options: { seconds: { type: 'string', default: '3' }, inflight: { type: 'string', default: '16' } },
});
const seconds = Number(values.seconds);
const inflight = Number(values.inflight);
const POOL = 4;

type Figures = { decisions: number; perSecond: number; p50: number; p99: number };

/** Runs `decide` from `inflight` concurrent loops for `seconds`; latencies in ms. */
async function drive(decide: (i: number) => Promise<unknown>): Promise<Figures> {
  const latencies: number[] = [];
  const until = performance.now() + seconds * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      while (performance.now() < until) {
        const started = performance.now();
        await decide(n++);
        latencies.push(performance.now() - started);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { decisions: latencies.length, perSecond: latencies.length / seconds, p50: at(0.5), p99: at(0.99) };
}

const counterOf = (hot: boolean, i: number) => (hot ? 'hot' : `key-${i % 1000}`);
const HIGH = { limit: 1_000_000, duration: 60 };

/** Leases: a replica takes `slice` slots in one guarded UPDATE and spends them in memory. */
function leasing(sql: SQL, slice: number) {
  const held = new Map<string, number>();
  const pending = new Map<string, Promise<boolean>>();
  return async (counter: string): Promise<boolean> => {
    for (;;) {
      const left = held.get(counter) ?? 0;
      if (left > 0) {
        held.set(counter, left - 1);
        return true;
      }
      // One lease request per counter at a time; the others wait for it.
      let request = pending.get(counter);
      if (request === undefined) {
        request = (async () => {
          const rows = await sql`UPDATE lease_counters SET used = used + ${slice}
            WHERE counter = ${counter} AND used + ${slice} <= ${HIGH.limit} RETURNING used`;
          if (rows.length > 0) held.set(counter, (held.get(counter) ?? 0) + slice);
          return rows.length > 0;
        })().finally(() => pending.delete(counter));
        pending.set(counter, request);
      }
      if (!(await request)) return false;
    }
  };
}

const server = await startPostgres({ maxConnections: 50 });
const results: Record<string, string>[] = [];
const record = (way: string, replicas: number, keys: string, f: Figures) => {
  results.push({
    way,
    replicas: String(replicas),
    keys,
    'decisions/s': f.perSecond.toFixed(0),
    'p50 ms': f.p50.toFixed(2),
    'p99 ms': f.p99.toFixed(2),
  });
  console.log(JSON.stringify(results.at(-1)));
};
try {
  const memory = new MemoryRateLimiter(() => Date.now());
  for (const hot of [true, false]) {
    const keys = hot ? '1 hot' : '1000';
    record(
      'in memory (ceiling)',
      1,
      keys,
      await drive(async (i) => memory.consume([{ counter: counterOf(hot, i), ...HIGH }])),
    );
  }

  let database = 0;
  for (const replicas of [1, 2]) {
    for (const hot of [true, false]) {
      const keys = hot ? '1 hot' : '1000';
      const url = server.createDatabase(`costs_${++database}`);
      const pools = await Promise.all(Array.from({ length: replicas }, () => openPostgres(url, POOL)));
      const limiters = pools.map((db) => createPostgresRateLimiter(db.$client));
      const write = await drive((i) => {
        const limit: CountedLimit = { counter: counterOf(hot, i), ...HIGH };
        return (limiters[i % replicas] as (typeof limiters)[number]).consume([limit]);
      });
      record('write per decision', replicas, keys, write);
      const refusals = await drive((i) => {
        const limit: CountedLimit = { counter: `refused-${counterOf(hot, i)}`, limit: 1, duration: 3600 };
        return (limiters[i % replicas] as (typeof limiters)[number]).consume([limit]);
      });
      record('per decision, refusals', replicas, keys, refusals);
      const bare = await drive((i) => (pools[i % replicas] as (typeof pools)[number]).$client`SELECT 1`);
      record('round trip (SELECT 1)', replicas, keys, bare);
      const first = (pools[0] as (typeof pools)[number]).$client;
      await first`CREATE UNLOGGED TABLE lease_counters (counter text PRIMARY KEY, used integer NOT NULL)`;
      await first`INSERT INTO lease_counters SELECT 'key-' || i, 0 FROM generate_series(0, 999) AS i`;
      await first`INSERT INTO lease_counters VALUES ('hot', 0)`;
      for (const slice of [1, 10, 100]) {
        const leases = pools.map((db) => leasing(db.$client, slice));
        const leased = await drive((i) =>
          (leases[i % replicas] as (typeof leases)[number])(counterOf(hot, i)),
        );
        record(`lease of ${slice}`, replicas, keys, leased);
      }
      for (const db of pools) await db.$client.close();
    }
  }
  console.log();
  console.table(results);
} finally {
  server.destroy();
}
