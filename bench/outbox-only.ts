// The outbox's own cost, apart from delivery: creates through the key service in this process (no
// HTTP), 64 at a time, with one endpoint taking key.created enabled and disabled in turn, the sender
// stopped (the messages are written, never sent). Prints creates/s of each and the ratio of medians.
//   flock /tmp/keygate-load.lock bun bench/outbox-only.ts [sqlite|postgres]
import { crashDatabase } from '../scripts/experiments/support/crash-database';
import { loadConfig } from '../src/config';
import { createLogger } from '../src/core/log';
import { createKeygate } from '../src/keygate';

const engine = process.argv[2] ?? 'sqlite';
const database = await crashDatabase(engine === 'postgres' ? 'postgres' : 'sqlite');
const url = database.url;
const config = loadConfig({
  DATABASE_URL: url,
  JWT_SECRET: 'x'.repeat(40),
  WEBHOOK_ALLOW_PRIVATE: 'true',
  MAX_KEYS_PER_USER: '1000000000',
  LOG_LEVEL: 'silent',
});
const kg = await createKeygate(config, {
  logger: createLogger('silent', () => {}),
  jwtSecret: 'x'.repeat(40),
  webhookTimer: () => () => {},
});
await kg.webhooks.sender.stop();
const ep = await kg.webhooks.service.create({ url: 'http://127.0.0.1:9/x', events: ['key.created'] });
const run = async (n: number) => {
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < n) {
        next++;
        await kg.service.createKey(
          { userId: next % 200, level: 8, by: 'bench' },
          { name: 'b', level: 1, expiresIn: 86400 },
        );
      }
    }),
  );
  return n / ((performance.now() - t) / 1000);
};
await run(3000);
const rates = { none: [] as number[], one: [] as number[] };
for (let r = 0; r < 3; r++) {
  for (const mode of ['none', 'one'] as const) {
    await kg.webhooks.service.update(ep.endpoint.id, { enabled: mode === 'one' });
    rates[mode].push(Math.round(await run(10000)));
  }
}
const med = (v: number[]) => [...v].sort((a, b) => a - b)[1] as number;
console.log(
  JSON.stringify({ engine, rates, ratio: Math.round((med(rates.one) / med(rates.none)) * 1000) / 1000 }),
);
await kg.close();
await database.destroy();
