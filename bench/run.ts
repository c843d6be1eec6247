// The load benchmark (`bun run bench`): builds dist/keygate, runs it pinned to CPU 0 beside a bare
// Elysia "ceiling" on the same core, drives both with wrk pinned to CPU 1, and writes bench/RESULTS.md
// (the latest run only; bench/HISTORY.md is written by hand and never touched here).
// Every keygate run sits between two ceiling runs of the same round (POST, or GET for forward-auth);
// its ratio is to their mean.
// Options: --duration S --warmup S --rounds N --connections N --users N --seed N --verify-keys N --purge
//          --postgres --log-level L --no-build --metrics --startups N --cases a,b --baseline COMMIT
//          (each also BENCH_DURATION, BENCH_VERIFY_KEYS, ...; see bench/options.ts).
// --baseline COMMIT builds that commit in a temporary git worktree and runs the A/B cases (verify (key),
// forward-auth (key)) on its build too, beside this build's run in every round (which goes first
// alternates by round); the report gives this build ÷ the baseline's.
// --postgres runs every case once more on a throwaway PostgreSQL (Debian's server, pinned to the
// server's CPU beside keygate, synchronous_commit on), from the same empty database.
// --metrics: keygate also serves /metrics on a second port (to measure what metrics cost).
// What each case measures is in bench/cases.ts, how the figures are shown in bench/report.ts.

import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import {
  AB_CASES,
  type Ceiling,
  cases,
  databasesOf,
  PEER_DIR,
  type PeerKeys,
  prepareFixtures,
} from './cases';
import {
  type Bench,
  buildBaseline,
  cleanUp,
  ensurePeerInstalled,
  freePort,
  LOAD_CPU,
  measureStartup,
  runCase,
  SERVER_CPU,
  say,
  start,
  startBenchPostgres,
  stop,
  stopBenchPostgres,
  waitFor200,
  wrk,
} from './driver';
import type { Figures, Memory, Run } from './figures';
import { parseOptions, selectsCase } from './options';
import { measurePurge } from './purge';
import { fixed, renderReport, resultsFile, thousands } from './report';

const ROOT = join(import.meta.dir, '..');
const BENCH = import.meta.dir;
const BUILT_BINARY = join(ROOT, 'dist', 'keygate');
const RESULTS_FILE = join(BENCH, 'RESULTS.md');

const options = parseOptions(process.argv.slice(2), process.env);
const bench: Bench = {
  options,
  jwtSecret: randomBytes(48).toString('base64url'),
  scratch: '',
  binary: BUILT_BINARY,
};

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    process.stderr.write(`\nbench: ${signal}, stopping what it started\n`);
    cleanUp(bench.scratch);
    process.exit(130);
  });
}

function machineLine(): string {
  const kernel = readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim();
  return `${cpus().length} CPUs (nproc ${navigator.hardwareConcurrency}), ${cpus()[0]?.model ?? 'unknown CPU'}, Linux ${kernel}, Bun ${Bun.version}`;
}

async function main(): Promise<void> {
  const begun = performance.now();
  // Pin ourselves (and so the fetches of the start-up measurement) to the load CPU.
  Bun.spawnSync(['taskset', '-a', '-pc', LOAD_CPU, String(process.pid)], { stdout: 'ignore' });
  if (!Bun.which('wrk')) {
    say('bench: wrk is not installed: apt-get install wrk');
    process.exit(1);
  }
  if (options.build) {
    say('building dist/keygate ...');
    const build = Bun.spawnSync(['bun', 'run', 'build'], { cwd: ROOT, stdout: 'inherit', stderr: 'inherit' });
    if (build.exitCode !== 0) throw new Error('bun run build failed');
  }
  mkdirSync(join(BENCH, '.run'), { recursive: true });
  bench.scratch = join(BENCH, '.run', `run-${process.pid}-${Date.now()}`);
  mkdirSync(bench.scratch);
  // The run uses its own copy, so a rebuild by someone else mid-run cannot change what is measured.
  bench.binary = join(bench.scratch, 'keygate');
  copyFileSync(BUILT_BINARY, bench.binary);
  chmodSync(bench.binary, 0o755);
  if (options.baseline !== '') bench.baseline = buildBaseline(ROOT, options.baseline, bench.scratch);

  const context = { options, scratch: bench.scratch, say };
  if (options.postgres) bench.postgres = await startBenchPostgres();
  const fixtures = await prepareFixtures(context, bench.jwtSecret);
  const ceilingPort = freePort();
  const ceiling = start(['taskset', '-c', SERVER_CPU, 'bun', join(BENCH, 'ceiling.ts')], {
    env: { PORT: String(ceilingPort) },
  });
  const ceilingUrl = `http://127.0.0.1:${ceilingPort}`;
  await waitFor200(`${ceilingUrl}/health`, 10_000);

  say(`start-up: ${options.startups} starts of the compiled binary ...`);
  const startup = await measureStartup(bench);
  say(
    `start-up median ${fixed(startup.medianMs, 1)} ms (min ${fixed(startup.minMs, 1)}, max ${fixed(startup.maxMs, 1)})`,
  );

  const ceilingGets: Figures[] = [];
  const ceilingRun = async (kind: Ceiling, seconds: number) => {
    if (kind === 'POST') {
      return wrk(
        ceilingUrl,
        'create.lua',
        ['/apikeys/jwt', fixtures.bearerFile],
        seconds,
        options.connections,
      );
    }
    const get = await wrk(`${ceilingUrl}/health`, 'get.lua', [], seconds, options.connections);
    ceilingGets.push(get);
    return get;
  };
  await ceilingRun('POST', options.warmup + 1);

  const dbs = Object.keys(fixtures.templates).filter((name) => name !== 'expired');
  const runs: Run[] = [];
  const memory: Memory = {};
  for (const db of dbs) memory[db] = { idleKb: [], peakKb: [] };
  const peer: { keys?: PeerKeys } = {};
  const everyCase = cases(context, fixtures, peer);
  const names = everyCase.map((c) => c.name);
  const allCases = everyCase.filter((c) => selectsCase(options.cases, c.name, names));
  if (allCases.some((c) => c.build === 'bench')) {
    // Built every run, into the scratch directory: the same code as dist/keygate, another entry.
    say('building the bench build (bench/keygate-entry.ts) ...');
    bench.benchBinary = join(bench.scratch, 'keygate-bench');
    const build = Bun.spawnSync(['bun', 'run', 'build', bench.benchBinary, 'bench/keygate-entry.ts'], {
      cwd: ROOT,
      stdout: 'inherit',
      stderr: 'inherit',
    });
    if (build.exitCode !== 0) throw new Error('building bench/keygate-entry.ts failed');
  }
  const needsGetCeiling = allCases.some((c) => c.ceiling === 'GET');
  if (allCases.some((c) => c.server === 'peer')) ensurePeerInstalled();
  for (let round = 1; round <= options.rounds; round++) {
    // The ceiling run after one case is the one before the next, when both want the same kind.
    let previous: { kind: Ceiling; figures: Figures } | undefined;
    let rateHint = 30_000;
    for (const benchCase of allCases) {
      const kind = benchCase.ceiling ?? 'POST';
      const server = benchCase.server ?? 'keygate';
      for (const db of databasesOf(benchCase, dbs)) {
        // The A/B cases run on the baseline's build too, on the empty SQLite database; which build goes
        // first alternates by round.
        const ab = bench.baseline !== undefined && db === 'empty' && AB_CASES.includes(benchCase.name);
        const builds: Array<'this' | 'baseline'> = !ab
          ? ['this']
          : round % 2 === 1
            ? ['this', 'baseline']
            : ['baseline', 'this'];
        for (const build of builds) {
          if (previous?.kind !== kind) previous = { kind, figures: await ceilingRun(kind, options.duration) };
          const onBaseline = build === 'baseline';
          const label = `r${round}-${benchCase.name.replace(/\W+/g, '-')}-${db}${onBaseline ? '-baseline' : ''}`;
          const figures = await runCase(bench, benchCase, db, label, rateHint, fixtures, memory, onBaseline);
          const next = await ceilingRun(kind, options.duration);
          if (server === 'keygate' && benchCase.expect !== 403 && !onBaseline) {
            rateHint = Math.max(rateHint, figures.rps);
          }
          const run: Run = {
            ...figures,
            round,
            case: benchCase.name,
            ...(onBaseline ? { build: 'baseline' as const } : {}),
            db,
            expect: benchCase.expect,
            ceiling: kind,
            ceilingRps: (previous.figures.rps + next.rps) / 2,
            ceilingP99: (previous.figures.p99 + next.p99) / 2,
          };
          runs.push(run);
          const on = onBaseline ? ` on the baseline ${bench.baseline?.hash}` : '';
          say(
            `round ${round} ${benchCase.name}${on} [${db}]: ${thousands(run.rps)} req/s, p50 ${fixed(run.p50)} p99 ${fixed(run.p99)} max ${fixed(run.max)} ms, non-2xx ${run.non2xx}, ÷ ceiling ${kind} ${fixed(run.rps / run.ceilingRps)} (ceiling ${thousands(run.ceilingRps)})`,
          );
          previous = { kind, figures: next };
        }
      }
    }
    // Without a GET case in the run, one ceiling GET a round still gives the report its row.
    if (!needsGetCeiling) {
      const get = await ceilingRun('GET', options.duration);
      say(`round ${round} ceiling GET: ${thousands(get.rps)} req/s, p99 ${fixed(get.p99)} ms`);
    }
  }

  const purge = options.purge ? await measurePurge(bench, fixtures) : undefined;
  await stop(ceiling);
  await stopBenchPostgres(bench.postgres);
  bench.postgres = undefined;

  const binaryBytes = statSync(bench.binary).size;
  const peerVersions = JSON.parse(readFileSync(join(PEER_DIR, 'package.json'), 'utf8')).dependencies;
  const report = renderReport({
    at: new Date(),
    machine: machineLine(),
    options,
    runs,
    ceilingGets,
    startup,
    memory,
    purge,
    binaryBytes,
    dbs,
    peerKeys: peer.keys,
    peerVersions,
    baseline: bench.baseline && { commit: bench.baseline.commit, hash: bench.baseline.hash },
  });
  say('');
  say(report);
  writeFileSync(RESULTS_FILE, resultsFile(report));
  writeFileSync(
    join(BENCH, '.run', `results-${new Date().toISOString().replace(/[:.]/g, '-')}.json`),
    JSON.stringify({ options, runs, ceilingGets, startup, memory, purge, binaryBytes }, null, 2),
  );
  say(`\nbench finished in ${Math.round((performance.now() - begun) / 1000)} s; wrote ${RESULTS_FILE}`);
}

main()
  .catch((error: unknown) => {
    process.stderr.write(`bench: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exitCode = 1;
  })
  .finally(() => {
    cleanUp(bench.scratch);
    process.exit();
  });
