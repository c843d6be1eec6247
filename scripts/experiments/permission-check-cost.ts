// What a permissions query costs a verification, in process: keygate on :memory: with keys holding 20
// permissions (the bench's), verified through keygate.handle with and without the bench's 5-name
// query, in interleaved rounds; µs per verify and the ratio of the rates (with ÷ without), medians.
// In process, the host's noise is smaller than over sockets (bench/HISTORY.md).
//   bun scripts/experiments/permission-check-cost.ts [--keys 10000] [--verifies 100000] [--rounds 7]
import { parseArgs } from 'node:util';
import { BENCH_PERMISSIONS, BENCH_PERMISSIONS_QUERY } from '../../bench/cases';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { createKeygate } from '../../src/keygate';

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '10000' },
    verifies: { type: 'string', default: '100000' },
    rounds: { type: 'string', default: '7' },
  },
});
const keyCount = Number(values.keys);
const verifies = Number(values.verifies);
const rounds = Number(values.rounds);

const secret = 'permission-check-cost-secret-32-bytes-long';
const keygate = await createKeygate(
  loadConfig({ DATABASE_URL: ':memory:', JWT_SECRET: secret, MAX_KEYS_PER_USER: '1000000' }),
  {
    jwtSecret: secret,
    logger: createLogger('silent'),
  },
);
const token = await keygate.jwt.sign({ sub: 1, ttlSeconds: 3600 });
const bodies: { plain: string[]; asked: string[] } = { plain: [], asked: [] };
for (let i = 0; i < keyCount; i++) {
  const response = await keygate.handle(
    new Request('http://localhost/apikeys/jwt', {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'cost', level: 3, expiresIn: 86_400, permissions: BENCH_PERMISSIONS }),
    }),
  );
  const { apikey } = (await response.json()) as { apikey: { key: string; secret: string } };
  bodies.plain.push(JSON.stringify({ key: apikey.key, secret: apikey.secret }));
  bodies.asked.push(
    JSON.stringify({ key: apikey.key, secret: apikey.secret, permissions: BENCH_PERMISSIONS_QUERY }),
  );
}

async function run(list: string[]): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < verifies; i++) {
    const response = await keygate.handle(
      new Request('http://localhost/apikeys/verify', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: list[i % list.length] as string,
      }),
    );
    const answer = (await response.json()) as { code: string };
    if (answer.code !== 'VALID') throw new Error(`verify answered ${answer.code}`);
  }
  return ((performance.now() - started) * 1000) / verifies;
}

const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)] as number;
await run(bodies.plain); // warm-up: every key in the cache, the hot path compiled
await run(bodies.asked);
const plain: number[] = [];
const asked: number[] = [];
for (let round = 0; round < rounds; round++) {
  // Each goes first in every other round: whatever favours the first (or second) run of a round
  // (a usage flush, the key cache's refresh, the collector) falls on both alike.
  if (round % 2 === 0) {
    plain.push(await run(bodies.plain));
    asked.push(await run(bodies.asked));
  } else {
    asked.push(await run(bodies.asked));
    plain.push(await run(bodies.plain));
  }
  console.log(
    `round ${round + 1}: without a query ${plain.at(-1)?.toFixed(2)} µs, asked 5 ${asked.at(-1)?.toFixed(2)} µs`,
  );
}
const ratios = plain.map((p, i) => p / (asked[i] as number));
console.log(
  `medians over ${rounds} rounds of ${verifies} verifies (${keyCount} keys of 20 permissions): without a query ${median(plain).toFixed(2)} µs, asked 5 names ${median(asked).toFixed(2)} µs; rate with ÷ without ${median(ratios).toFixed(3)} (rounds ${ratios.map((r) => r.toFixed(2)).join(', ')})`,
);
await keygate.close();
