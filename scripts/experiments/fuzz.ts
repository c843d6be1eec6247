// The hostile-input properties of test/fuzz/, run at length: hostile HTTP on every endpoint
// (test/fuzz/hostile-http.ts) and hostile key settings, updates, usage queries and costs
// (test/fuzz/key-settings-http.ts).
//   bun run fuzz -- --runs 100000 [--seed N] [--suite all|hostile|settings]
// --runs counts HTTP requests per suite (sequences are drawn until that many were sent). Every
// violation is counted instead of stopping at the first; the distinct kinds are printed with one
// example each. Exit 1 when any invariant broke.
import fc from 'fast-check';
import { hostileHttpProperty, newStats } from '../../test/fuzz/hostile-http';
import { keySettingsProperty, newSettingsStats } from '../../test/fuzz/key-settings-http';

function option(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  const value = at === -1 ? undefined : Number(process.argv[at + 1]);
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`--${name} needs a whole number`);
  return value;
}

const targetRequests = option('runs', 10_000);
const seed = option('seed', Date.now() % 2 ** 31);
const suiteAt = process.argv.indexOf('--suite');
const suite = suiteAt === -1 ? 'all' : process.argv[suiteAt + 1];
if (suite !== 'all' && suite !== 'hostile' && suite !== 'settings')
  throw new Error('--suite is all, hostile or settings');

let unhandled = 0;
process.on('unhandledRejection', (reason) => {
  unhandled++;
  console.error('unhandled rejection:', reason);
});

type Suite = {
  name: string;
  stats: { requests: number };
  property: (onViolations: (found: string[]) => void) => fc.IAsyncProperty<unknown>;
};

/** Runs one suite until it has sent `targetRequests`; its summary and its violations by kind. */
async function run({ name, stats, property }: Suite): Promise<number> {
  const kinds = new Map<string, { count: number; example: string }>();
  let violations = 0;
  let sequences = 0;
  const started = performance.now();
  let lastReport = started;
  for (let batch = 0; stats.requests < targetRequests; batch++) {
    const onViolations = (found: string[]) => {
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
    };
    await fc.assert(property(onViolations), { seed: seed + batch, numRuns: 200 });
    if (performance.now() - lastReport > 10_000) {
      lastReport = performance.now();
      console.log(`… ${name}: ${stats.requests} requests, ${violations} violations`);
    }
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(
    JSON.stringify({
      suite: name,
      seed,
      sequences,
      seconds: Math.round(seconds),
      requestsPerSecond: Math.round(stats.requests / seconds),
      ...stats,
      violations,
    }),
  );
  for (const [kind, { count, example }] of kinds)
    console.log(`\n${count} × ${kind}\n  e.g. ${example.slice(0, 1500)}`);
  return violations;
}

const suites: Suite[] = [];
if (suite !== 'settings') {
  const stats = newStats();
  suites.push({ name: 'hostile-http', stats, property: (found) => hostileHttpProperty(stats, found) });
}
if (suite !== 'hostile') {
  const stats = newSettingsStats();
  suites.push({ name: 'key-settings', stats, property: (found) => keySettingsProperty(stats, found) });
}
let violations = 0;
for (const each of suites) violations += await run(each);
console.log(JSON.stringify({ violations, unhandledRejections: unhandled }));
process.exit(violations > 0 || unhandled > 0 ? 1 : 0);
