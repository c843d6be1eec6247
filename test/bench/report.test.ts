// The bench's report, rendered from canned figures: the medians and ratios of its tables, the targets'
// verdicts, the peer and purge paragraphs, and RESULTS.md holding the latest run alone.
import { describe, expect, it } from 'bun:test';
import type { CaseName } from '../../bench/cases';
import type { Figures, PurgeResult, Run, SliceSummary } from '../../bench/figures';
import { parseOptions } from '../../bench/options';
import { type ReportInput, renderReport, resultsFile } from '../../bench/report';

const figures: Figures = {
  requests: 40_000,
  rps: 10_000,
  p50: 1,
  p99: 2,
  max: 5,
  non2xx: 0,
  socketErrors: 0,
};

function run(name: CaseName, db: string, round: number, changes: Partial<Run> = {}): Run {
  return {
    ...figures,
    round,
    case: name,
    db,
    ceiling: 'POST',
    ceilingRps: 20_000,
    ceilingP99: 1,
    expect: 201,
    ...changes,
  };
}

/** Three rounds of keygate's create (9k, 10k, 11k req/s) and of the durable floor (10k each). */
const createAndFloor: Run[] = [1, 2, 3].flatMap((round) => [
  run('create via JWT', 'empty', round, { rps: 8_000 + 1_000 * round }),
  run('durable floor', 'own', round),
]);

function input(changes: Partial<ReportInput> = {}): ReportInput {
  return {
    at: new Date('2026-11-25T01:07:30Z'),
    machine: '2 CPUs (nproc 2), a test CPU, Linux 6.1, Bun 1.4.4',
    options: parseOptions([], {}),
    runs: createAndFloor,
    ceilingGets: [{ ...figures, rps: 30_000, p99: 1.5 }],
    startup: { medianMs: 84.8, minMs: 62.6, maxMs: 92.5 },
    memory: { empty: { idleKb: [51_200], peakKb: [102_400, 153_600] } },
    purge: undefined,
    binaryBytes: 116_900_000,
    dbs: ['empty'],
    peerKeys: undefined,
    peerVersions: { 'better-auth': '1.0.0', '@better-auth/api-key': '1.0.0' },
    ...changes,
  };
}

const lineOf = (report: string, start: string) => report.split('\n').find((line) => line.startsWith(start));

describe("the bench's report", () => {
  it('opens with when and where the run was made', () => {
    const report = renderReport(input());
    expect(report.split('\n')[0]).toBe(
      'Run 2026-11-25 01:07 UTC — 2 CPUs (nproc 2), a test CPU, Linux 6.1, Bun 1.4.4',
    );
  });

  it('gives each case its medians over rounds and its ratios to the ceiling around it', () => {
    const report = renderReport(input());
    expect(lineOf(report, '| create via JWT |')).toBe(
      '| create via JWT | empty | 10,000 | 1.00 | 2.00 | 5.00 | 0 | 0.50 | 2.00 |',
    );
    expect(lineOf(report, '| durable floor |')).toBe(
      '| durable floor | its own SQLite file | 10,000 | 1.00 | 2.00 | 5.00 | 0 | 0.50 | 2.00 |',
    );
    expect(lineOf(report, '| ceiling GET |')).toBe(
      '| ceiling GET | — | 30,000 | 1.00 | 1.50 | 5.00 | 0 | | |',
    );
  });

  it('judges a target from the medians, and names what a run did not measure', () => {
    const report = renderReport(input());
    expect(lineOf(report, '| create via JWT ÷ durable floor (same run) |')).toBe(
      '| create via JWT ÷ durable floor (same run) | 1.00 (10,000 ÷ 10,000 req/s; by round 0.90, 1.00, 1.10, median 1.00) | ≥ 0.9 | met |',
    );
    expect(lineOf(report, "| worst case's p99 ÷ its ceiling p99 |")).toBe(
      "| worst case's p99 ÷ its ceiling p99 | 2.00 (create via JWT, empty) | ≤ 3 | met |",
    );
    expect(lineOf(report, '| create and delete with 1M live keys ÷ empty database |')).toBe(
      '| create and delete with 1M live keys ÷ empty database | not measured in this run (needs --seed 1000000) | ≥ 0.9 | — |',
    );
    const slowCreate = createAndFloor.map((r) => (r.case === 'create via JWT' ? { ...r, rps: 8_000 } : r));
    expect(lineOf(renderReport(input({ runs: slowCreate })), '| create via JWT ÷ durable floor')).toEndWith(
      '| ≥ 0.9 | not met |',
    );
  });

  it('judges creates on PostgreSQL against the same creates on SQLite in the same run', () => {
    const row = '| create on PostgreSQL ÷ the same create on SQLite, empty databases (same run) |';
    expect(lineOf(renderReport(input()), row)).toBe(
      `${row} not measured in this run (needs --postgres) | ≥ 0.5 | — |`,
    );
    const onPostgres = (rps: number) =>
      [1, 2, 3].map((round) => run('create via JWT', 'postgres', round, { rps: rps + 500 * round }));
    const options = parseOptions(['--postgres'], {});
    expect(
      lineOf(renderReport(input({ options, runs: [...createAndFloor, ...onPostgres(4_000)] })), row),
    ).toBe(`${row} create via JWT 0.50 (5,000 ÷ 10,000 req/s; by round 0.50, 0.50, 0.50) | ≥ 0.5 | met |`);
    expect(
      lineOf(renderReport(input({ options, runs: [...createAndFloor, ...onPostgres(3_000)] })), row),
    ).toEndWith('| ≥ 0.5 | not met |');
  });

  it("judges a limit's cost from each case's ratio to the ceiling around it, not from raw req/s alone", () => {
    // The limited case ran while the host was busier: fewer req/s, and a slower ceiling around it.
    const runs = [1, 2, 3].flatMap((round) => [
      run('verify (key)', 'empty', round, { rps: 20_000, ceilingRps: 40_000 }),
      run('verify (key with rate limit)', 'empty', round, {
        rps: 15_000,
        ceilingRps: 25_000 + 1_000 * round,
      }),
    ]);
    const report = renderReport(input({ runs }));
    expect(lineOf(report, '| verify of keys with their own rate limit ÷ without, 10k keys, SQLite |')).toBe(
      '| verify of keys with their own rate limit ÷ without, 10k keys, SQLite | 1.11 (÷ ceiling 0.56 against 0.50; by round 1.15, 1.11, 1.07; req/s 15,000 ÷ 20,000 = 0.75) | ≥ 0.85 | met |',
    );
    expect(lineOf(report, '| the same on PostgreSQL, two replicas, each key spread over both |')).toBe(
      '| the same on PostgreSQL, two replicas, each key spread over both | not measured in this run (needs the verify (key with rate limit) 2 replicas and verify (key) 2 replicas cases with --postgres) | ≥ 0.5 | — |',
    );
  });

  it("judges this build against the baseline's by the median of the rounds, each run taken ÷ its ceiling", () => {
    // Three rounds: this build ÷ the baseline's 0.90, 1.00, 0.98 after each ÷ its ceiling.
    const ours = [18_000, 20_000, 19_600];
    const runs = [1, 2, 3].flatMap((round) => [
      run('verify (key)', 'empty', round, { rps: ours[round - 1] as number, ceilingRps: 40_000 }),
      run('verify (key)', 'empty', round, { rps: 20_000, ceilingRps: 40_000, build: 'baseline' }),
    ]);
    const report = renderReport(input({ runs, baseline: { commit: '657c95d', hash: '657c95d' } }));
    const row =
      '| verify (key), this build ÷ the build of 657c95d, plain keys (no limit), SQLite, interleaved |';
    expect(lineOf(report, row)).toBe(
      `${row} 0.98 (median of rounds 0.90, 1.00, 0.98; ÷ ceiling 0.49 against 0.50; req/s 19,600 ÷ 20,000 = 0.98) | ≥ 0.97 | met |`,
    );
    expect(lineOf(report, '| forward-auth (key), this build ÷ the build of 657c95d')).toEndWith(
      'not measured in this run (needs the forward-auth (key) case) | ≥ 0.97 | — |',
    );
    // The baseline's runs have a row of their own, and are not counted in this build's.
    expect(lineOf(report, '| verify (key) | empty |')).toStartWith('| verify (key) | empty | 19,600 |');
    expect(lineOf(report, '| verify (key) on the baseline 657c95d |')).toStartWith(
      '| verify (key) on the baseline 657c95d | empty, its schema | 20,000 |',
    );
    // Another name for the commit is kept beside its hash; without --baseline the row says what it needs.
    const named = renderReport(input({ runs, baseline: { commit: 'v1.0.0', hash: '1e5f991' } }));
    expect(lineOf(named, '| verify (key), this build ÷ the build of 1e5f991 (v1.0.0),')).toBeDefined();
    expect(
      lineOf(
        renderReport(input({ runs: runs.filter((r) => r.build === undefined) })),
        '| verify (key), this build ÷ the build of a baseline,',
      ),
    ).toEndWith('| not measured in this run (needs --baseline COMMIT) | ≥ 0.97 | — |');
  });

  it('compares keygate with the peer, saying how the peer made fewer keys than keygate verifies over', () => {
    const runs = [
      ...createAndFloor,
      ...[1, 2, 3].map((round) => run('peer create (better-auth)', 'own', round, { rps: 1_000, p99: 80 })),
    ];
    const report = renderReport(input({ runs, peerKeys: { created: 4_000, ms: 20_500, used: 1_000 } }));
    expect(lineOf(report, '| create | create via JWT |')).toBe(
      '| create | create via JWT | 10,000 | 2.00 | 1,000 | 80.00 | 10.00 |',
    );
    expect(report).toContain('Beside better-auth 1.0.0 with @better-auth/api-key 1.0.0');
    expect(report).toContain(
      "rotates over 1,000 keys created through its own API before each run (in the first round 4,000 made in 20.5 s), fewer than keygate's 10,000 because 10,000 took longer than 20 s.",
    );
  });

  it('says when the purge had not finished, in its paragraph and in its target', () => {
    const summary = (worstMax: number): SliceSummary => ({
      slices: 2,
      worstMax,
      medianMax: worstMax,
      worstP99: 4,
      medianP99: 3,
      rps: 9_000,
    });
    const purge: PurgeResult = {
      finished: false,
      removed: 101_025,
      purgeMs: 73_387,
      slices: [
        { ...figures, startedMs: 0, endedMs: 1_000, phase: 'before' },
        { ...figures, startedMs: 5_000, endedMs: 6_000, phase: 'during' },
      ],
      baselineSlices: [],
      baselineRemoved: 0,
      compared: 'worst of 2 1-s slices during the purge vs worst of 2',
      during: summary(30),
      baseline: summary(12.5),
    };
    const report = renderReport(input({ purge }));
    expect(report).toContain(
      "Purge: keygate's own timer had NOT finished: 101,025 of 1,000,000 expired keys removed after 73,387 ms",
    );
    expect(report).toContain('(1-s slices: 1 before, 1 during, 0 after)');
    expect(lineOf(report, '| added max latency while purging')).toContain(
      '| 17.50 ms (30.00 − 12.50: worst of 2 1-s slices during the purge vs worst of 2; the purge had NOT finished) | ≤ 10 ms | not met |',
    );
  });

  it('ends with start-up, binary size and memory', () => {
    const report = renderReport(input());
    expect(report.split('\n').at(-1)).toBe(
      'Start-up (process start to first /health 200, fresh database, median of 20): 84.8 ms (min 62.6, max 92.5). Binary 116.9 MB. RSS empty: idle 50.0 MB, peak 150.0 MB.',
    );
  });
});

describe('RESULTS.md', () => {
  it('holds the latest run alone and points to the history kept by hand', () => {
    const report = renderReport(input());
    const file = resultsFile(report);
    expect(file.startsWith('# keygate load benchmark\n')).toBe(true);
    expect(file.endsWith(`## Latest run\n\n${report}\n`)).toBe(true);
    expect(file).toContain('HISTORY.md');
    expect(file).not.toContain('## History');
    expect(file.match(/^## /gm)).toEqual(['## ']);
  });
});
