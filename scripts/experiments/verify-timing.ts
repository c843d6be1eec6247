// Does POST /apikeys/verify take the same time for an unknown key and for a known key with a wrong
// secret? Starts the compiled binary on 127.0.0.1, creates a key, then sends the two kinds of request
// interleaved, one at a time over one keep-alive connection, and prints the median and p90 of each
// and their difference in µs. Also a third series: a fresh unknown id every time (nothing cached).
// Run under the load lock: flock /tmp/keygate-load.lock bun run scripts/experiments/verify-timing.ts [--requests 2000]
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { generateKeyId, generateSecret } from '../../src/apikeys/secrets';
import { flag, jwt, percentile, round, startKeygate, stopGracefully, tempDir } from './support/server';

const requests = flag('requests', 2000);
const warmup = flag('warmup', 200);
const dir = tempDir('verify-timing');
const keygate = await startKeygate({ databaseUrl: join(dir, 'keygate.db') });

try {
  const created = await fetch(`${keygate.base}/apikeys/jwt`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${await jwt.sign({ sub: 1, ttlSeconds: 600 })}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify({ name: 'timing', level: 1, expiresIn: 600 }),
  });
  const { apikey } = (await created.json()) as { apikey: { key: string } };
  const unknownKey = generateKeyId(Date.now());

  const series = {
    'unknown key': () => ({ key: unknownKey, secret: generateSecret() }),
    'wrong secret': () => ({ key: apikey.key, secret: generateSecret() }),
    'unknown key, fresh id each time': () => ({ key: generateKeyId(Date.now()), secret: generateSecret() }),
  } as const;
  type Series = keyof typeof series;
  const samples: Record<Series, number[]> = {
    'unknown key': [],
    'wrong secret': [],
    'unknown key, fresh id each time': [],
  };
  const bodies = new Set<string>();

  const timeOne = async (name: Series): Promise<number> => {
    const body = JSON.stringify(series[name]());
    const started = performance.now();
    const response = await fetch(`${keygate.base}/apikeys/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    const text = await response.text();
    const micros = (performance.now() - started) * 1000;
    if (response.status !== 200) throw new Error(`verify answered ${response.status}: ${text}`);
    bodies.add(text);
    return micros;
  };

  const names = Object.keys(series) as Series[];
  for (let i = 0; i < warmup; i++) for (const name of names) await timeOne(name);
  for (let i = 0; i < requests; i++) {
    // Interleaved, and the order rotated each time, so drift in the machine hits every series alike.
    for (let j = 0; j < names.length; j++) {
      const name = names[(i + j) % names.length] as Series;
      samples[name].push(await timeOne(name));
    }
  }

  const summary = Object.fromEntries(
    names.map((name) => {
      const sorted = [...samples[name]].sort((a, b) => a - b);
      return [name, { median: percentile(sorted, 50), p90: percentile(sorted, 90) }];
    }),
  ) as Record<Series, { median: number; p90: number }>;
  console.log(
    `verify timing: ${requests} requests per series after ${warmup} warm-up, sequential, one connection`,
  );
  for (const name of names) {
    console.log(
      `  ${name.padEnd(32)} median ${round(summary[name].median, 1)} µs   p90 ${round(summary[name].p90, 1)} µs`,
    );
  }
  const difference = (a: Series, b: Series) =>
    `median ${round(summary[a].median - summary[b].median, 1)} µs, p90 ${round(summary[a].p90 - summary[b].p90, 1)} µs`;
  console.log(`  unknown key − wrong secret: ${difference('unknown key', 'wrong secret')}`);
  console.log(
    `  fresh unknown id − wrong secret: ${difference('unknown key, fresh id each time', 'wrong secret')}`,
  );
  console.log(`  distinct response bodies: ${bodies.size} (${[...bodies].join(' ')})`);
} finally {
  await stopGracefully(keygate);
  rmSync(dir, { recursive: true, force: true });
}
