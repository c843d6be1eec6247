// Soak: mixed load at about half of measured capacity for a long time.
//   flock /tmp/keygate-load.lock bun scripts/experiments/soak.ts [--minutes 10] [--fraction 0.5] [--capacity RPS]
// Measures capacity first (closed loop, 64 in flight, 15 s), then sends at `fraction` of it, open
// loop, and reports per minute: requests, errors (unexpected status or transport error), p50/p99,
// and the server's RSS. Passes when there are 0 errors, every minute's RSS after the first is within
// ±10% of minute 1's, and no minute's p99 exceeds twice the median of the minute p99s.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createMixedLoad, type Outcome } from './support/load';
import { flag, percentile, round, startKeygate, stopGracefully, tempDir } from './support/server';

const minutes = flag('minutes', 10);
const fraction = flag('fraction', 0.5);
const givenCapacity = flag('capacity', 0);
const MAX_IN_FLIGHT = 1024;

const dir = tempDir('soak');
// PURGE_INTERVAL_SECONDS=10: the purge runs several times a minute, under load.
const server = await startKeygate({
  databaseUrl: join(dir, 'keygate.db'),
  env: { PURGE_INTERVAL_SECONDS: '10' },
});
const next = await createMixedLoad(server.base);

function rssMiB(): number {
  const status = readFileSync(`/proc/${server.pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
  return round(kb / 1024, 1);
}

async function measureCapacity(seconds: number, concurrency: number): Promise<number> {
  const until = performance.now() + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        await next();
        done++;
      }
    }),
  );
  return done / seconds;
}

// Warm up (fills the key pool), then measure.
await measureCapacity(5, 64);
const capacity = givenCapacity || (await measureCapacity(15, 64));
const rate = capacity * fraction;
console.log(
  `capacity ≈ ${Math.round(capacity)} req/s; soaking at ${Math.round(rate)} req/s for ${minutes} min (RSS now ${rssMiB()} MiB)`,
);

type Minute = {
  minute: number;
  requests: number;
  errors: number;
  p50: number;
  p99: number;
  max: number;
  rssMiB: number;
  dropped: number;
};
const report: Minute[] = [];
const errorSamples: string[] = [];
let latencies: number[] = [];
let errors = 0;
let dropped = 0;
let inFlight = 0;

const record = (outcome: Outcome) => {
  inFlight--;
  latencies.push(outcome.ms);
  if (!outcome.ok) {
    errors++;
    if (errorSamples.length < 10 && outcome.detail) errorSamples.push(outcome.detail);
  }
};

// Sorting 400,000 latencies stalls this process for ~100 ms, which would show up as latency of the
// requests in flight: a minute's percentiles are computed only after the run.
const minuteLatencies: number[][] = [];

function closeMinute(): void {
  const minute: Minute = {
    minute: report.length + 1,
    requests: latencies.length,
    errors,
    p50: Number.NaN,
    p99: Number.NaN,
    max: Number.NaN,
    rssMiB: rssMiB(),
    dropped,
  };
  report.push(minute);
  minuteLatencies.push(latencies);
  console.log(
    JSON.stringify({
      minute: minute.minute,
      requests: minute.requests,
      errors,
      dropped,
      rssMiB: minute.rssMiB,
    }),
  );
  latencies = [];
  errors = 0;
  dropped = 0;
}

const started = performance.now();
let sent = 0;
let minuteStart = started;
const TICK_MS = 5;
while (report.length < minutes) {
  // Open loop: by now `rate × elapsed` requests should have left, whatever the answers are doing.
  const due = Math.floor(((performance.now() - started) / 1000) * rate);
  while (sent < due) {
    sent++;
    if (inFlight >= MAX_IN_FLIGHT) {
      dropped++;
      continue;
    }
    inFlight++;
    next().then(record);
  }
  if (performance.now() - minuteStart >= 60_000) {
    closeMinute();
    minuteStart += 60_000;
  }
  await Bun.sleep(TICK_MS);
}
while (inFlight > 0) await Bun.sleep(10);
// Answers still in flight when the last minute closed count toward it.
const last = report.at(-1);
if (last) last.errors += errors;

for (const [i, minute] of report.entries()) {
  const sorted = (minuteLatencies[i] ?? []).sort((a, b) => a - b);
  minute.p50 = round(percentile(sorted, 50));
  minute.p99 = round(percentile(sorted, 99));
  minute.max = round(sorted.at(-1) ?? Number.NaN);
  console.log(JSON.stringify(minute));
}

const exit = await stopGracefully(server);
rmSync(dir, { recursive: true, force: true });

const baseline = report[0]?.rssMiB ?? Number.NaN;
const later = report.slice(1);
const rssWithin = later.every((m) => Math.abs(m.rssMiB - baseline) <= baseline * 0.1);
const p99s = report.map((m) => m.p99).sort((a, b) => a - b);
const medianP99 = p99s[Math.floor(p99s.length / 2)] ?? Number.NaN;
const p99Stable = report.every((m) => m.p99 <= 2 * medianP99);
const totalErrors = report.reduce((n, m) => n + m.errors + m.dropped, 0);
const summary = {
  minutes: report.length,
  capacityPerSecond: Math.round(capacity),
  ratePerSecond: Math.round(rate),
  requests: report.reduce((n, m) => n + m.requests, 0),
  errors: totalErrors,
  errorSamples,
  rssMinute1MiB: baseline,
  rssRangeAfterMinute1MiB: later.length
    ? [Math.min(...later.map((m) => m.rssMiB)), Math.max(...later.map((m) => m.rssMiB))]
    : [],
  rssWithin10Percent: rssWithin,
  p99PerMinuteMs: report.map((m) => m.p99),
  p99Stable,
  gracefulStopExitCode: exit,
};
console.log(JSON.stringify(summary, null, 2));
process.exit(totalErrors === 0 && rssWithin && p99Stable && exit === 0 ? 0 : 1);
