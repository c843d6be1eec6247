// The hostile-input property of test/fuzz/hostile-http.ts, run at length.
//   bun run fuzz -- --runs 100000 [--seed N]
// --runs counts HTTP requests (sequences are drawn until that many were sent). Every violation is
// counted instead of stopping at the first; the distinct kinds are printed with one example each.
// Exit 1 when any invariant broke.
import fc from 'fast-check';
import { hostileHttpProperty, newStats } from '../../test/fuzz/hostile-http';

function option(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  const value = at === -1 ? undefined : Number(process.argv[at + 1]);
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`--${name} needs a whole number`);
  return value;
}

const targetRequests = option('runs', 10_000);
const seed = option('seed', Date.now() % 2 ** 31);
const stats = newStats();
const kinds = new Map<string, { count: number; example: string }>();
let violations = 0;
let sequences = 0;
let unhandled = 0;
process.on('unhandledRejection', (reason) => {
  unhandled++;
  console.error('unhandled rejection:', reason);
});

const started = performance.now();
let lastReport = started;
for (let batch = 0; stats.requests < targetRequests; batch++) {
  const property = hostileHttpProperty(stats, (found) => {
    sequences++;
    for (const violation of found) {
      violations++;
      const kind =
        violation
          .split(' — ')[0]
          ?.replace(/kg_[A-Za-z0-9]+/g, 'kg_…')
          .replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '<id>')
          .slice(0, 120) ?? violation;
      const entry = kinds.get(kind) ?? { count: 0, example: violation };
      entry.count++;
      kinds.set(kind, entry);
    }
  });
  await fc.assert(property, { seed: seed + batch, numRuns: 200 });
  if (performance.now() - lastReport > 10_000) {
    lastReport = performance.now();
    console.log(`… ${stats.requests} requests, ${violations} violations`);
  }
}

const seconds = (performance.now() - started) / 1000;
console.log(
  JSON.stringify({
    seed,
    requests: stats.requests,
    sequences,
    unsendable: stats.unsendable,
    seconds: Math.round(seconds),
    requestsPerSecond: Math.round(stats.requests / seconds),
    statuses: stats.statuses,
    routes: stats.routes,
    violations,
    unhandledRejections: unhandled,
  }),
);
for (const [kind, { count, example }] of kinds)
  console.log(`\n${count} × ${kind}\n  e.g. ${example.slice(0, 1500)}`);
process.exit(violations > 0 || unhandled > 0 ? 1 : 0);
