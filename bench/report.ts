// The bench's report: the tables and targets of bench/RESULTS.md, rendered from a run's figures.
// Nothing here measures or reads a file; the same figures always render the same text.
import {
  AB_CASES,
  type CaseName,
  FAIRNESS_CASES,
  NO_PURGE_INTERVAL_SECONDS,
  OWN_DATABASE,
  PEER_PREPARE_MS,
  PEER_VERIFY_KEYS,
  type PeerKeys,
  PURGE_KEYS,
} from './cases';
import {
  type Figures,
  type Memory,
  median,
  type PurgeResult,
  type Run,
  type SlicePhase,
  type Startup,
} from './figures';
import type { Options } from './options';

/** Everything a report shows: the run's figures, and what the driver knew about the run. */
export type ReportInput = {
  /** When the run finished. */
  at: Date;
  /** CPUs, kernel and Bun of the machine that ran it. */
  machine: string;
  options: Options;
  runs: Run[];
  ceilingGets: Figures[];
  startup: Startup;
  memory: Memory;
  purge: PurgeResult | undefined;
  binaryBytes: number;
  /** keygate's databases in this run, in order (empty, seeded, postgres). */
  dbs: string[];
  /** How the peer's verify keys were made, when the peer's verify case ran. */
  peerKeys: PeerKeys | undefined;
  /** bench/peer's dependencies: the better-auth versions the peer rows name. */
  peerVersions: Record<string, string>;
  /** --baseline: the commit as given and the hash it resolved to. */
  baseline?: { commit: string; hash: string };
};

export const fixed = (value: number, digits = 2) => value.toFixed(digits);
export const thousands = (value: number) => Math.round(value).toLocaleString('en-US');

/** RESULTS.md: the latest run alone (earlier runs and what changed between them are in HISTORY.md). */
export function resultsFile(report: string): string {
  return (
    '# keygate load benchmark\n\n' +
    'Written by `bun run bench` (bench/run.ts), which replaces this file on every run. Earlier runs, and ' +
    'what each change did to the figures, are in HISTORY.md.\n\n' +
    `## Latest run\n\n${report}\n`
  );
}

/** The runs of one case on one database, every round, on this build (or on the baseline's). */
function runsOf(runs: Run[], name: CaseName, db: string, build?: 'baseline'): Run[] {
  return runs.filter((r) => r.case === name && r.db === db && r.build === build);
}

/** The baseline's name in the tables: its hash, and the commit as given when that was another name. */
function baselineLabel(baseline: { commit: string; hash: string }): string {
  return baseline.hash.startsWith(baseline.commit) || baseline.commit.startsWith(baseline.hash)
    ? baseline.hash
    : `${baseline.hash} (${baseline.commit})`;
}

/** Each round's `ours` req/s ÷ `theirs` in the same round, in round order. */
function roundByRound(ours: Run[], theirs: Run[]): number[] {
  return ours.flatMap((run) => {
    const other = theirs.find((r) => r.round === run.round);
    return other ? [run.rps / other.rps] : [];
  });
}

/** Medians over rounds of one case on one database. */
function mediansOf(list: Run[]) {
  return {
    requests: median(list.map((r) => r.requests)),
    rps: median(list.map((r) => r.rps)),
    p50: median(list.map((r) => r.p50)),
    p99: median(list.map((r) => r.p99)),
    max: median(list.map((r) => r.max)),
    non2xx: median(list.map((r) => r.non2xx)),
    ratio: median(list.map((r) => r.rps / r.ceilingRps)),
    p99Ratio: median(list.map((r) => r.p99 / r.ceilingP99)),
    heavyRps: median(list.map((r) => r.heavyRps ?? Number.NaN)),
  };
}

/** User 2's create latency beside a heavy user (user 1 alone) and beside the same load spread out. */
function renderFairness(input: ReportInput): string[] {
  const { runs, dbs, options } = input;
  const [alone, baseline] = FAIRNESS_CASES as [CaseName, CaseName];
  const group = (name: CaseName, db: string) => runsOf(runs, name, db);
  const measured = dbs.filter((db) => group(alone, db).length > 0 && group(baseline, db).length > 0);
  if (measured.length === 0) return [];
  const out: string[] = [];
  out.push(
    `Fairness: user 1 holds 100k live keys (cap raised); a heavy create-via-JWT load on ${Math.max(1, options.connections - 1)} connections ` +
      `and user 2 creating on 1 connection beside it, both wrk on CPU 1; the latencies are user 2's (medians over rounds).`,
  );
  out.push('');
  out.push(
    '| heavy load | database | heavy req/s | user 2 req/s | user 2 p50 ms | p99 ms | max ms | non-2xx |',
  );
  out.push('|---|---|---:|---:|---:|---:|---:|---:|');
  const heavyLabels: Record<string, string> = {
    [alone]: 'user 1 alone',
    [baseline]: `spread over the ${options.users} users (baseline)`,
  };
  for (const db of measured) {
    for (const name of [alone, baseline]) {
      const m = mediansOf(group(name, db));
      // wrk reports zero latencies when nothing completed; that is not a fast answer.
      const latencies =
        m.requests > 0 ? [m.p50, m.p99, m.max].map((ms) => fixed(ms)) : ['none completed', '—', '—'];
      out.push(
        `| ${heavyLabels[name]} | ${databaseLabel(db, options.seed)} | ${thousands(m.heavyRps)} | ${thousands(m.rps)} | ${latencies.join(' | ')} | ${thousands(m.non2xx)} |`,
      );
    }
  }
  out.push('');
  const ratios = measured.map((db) => {
    const [a, b] = [mediansOf(group(alone, db)), mediansOf(group(baseline, db))];
    if (a.requests === 0 || b.requests === 0)
      return `${databaseLabel(db, options.seed)} — (a user 2 run completed nothing)`;
    return `${databaseLabel(db, options.seed)} ${fixed(a.p99 / b.p99)}`;
  });
  out.push(`User 2's p99 beside user 1 alone ÷ beside the spread load: ${ratios.join('; ')}.`);
  return out;
}

/** keygate beside better-auth's api-key plugin: create and verify, same wrk settings, same core. */
function renderPeer(input: ReportInput): string[] {
  const { runs, options, peerKeys } = input;
  const pairs: Array<[string, CaseName, CaseName]> = [
    ['create', 'create via JWT', 'peer create (better-auth)'],
    ['verify', 'verify (key)', 'peer verify (better-auth)'],
  ];
  const group = (name: CaseName, db: string) => runsOf(runs, name, db);
  const measured = pairs.filter(
    ([, ours, peer]) => group(ours, 'empty').length > 0 && group(peer, OWN_DATABASE).length > 0,
  );
  if (measured.length === 0) return [];
  const versions = input.peerVersions;
  const out: string[] = [];
  out.push(
    `Beside better-auth ${versions['better-auth']} with @better-auth/api-key ${versions['@better-auth/api-key']} (bench/peer: Elysia, bun:sqlite WAL, synchronous=FULL, rate limit off), ` +
      `pinned to CPU 0 with its own database file, same wrk settings. keygate's rows are its empty SQLite database. ` +
      `The peer's create takes the user id in the body (no caller authentication); keygate's verifies a JWT. ` +
      `The peer's verify also writes the key's lastRequest (one UPDATE, its own fsync, on every call, even with rate limits off). ` +
      (peerKeys
        ? `The peer's verify rotates over ${thousands(peerKeys.used)} keys created through its own API before each run (in the first round ${thousands(peerKeys.created)} made in ${fixed(peerKeys.ms / 1000, 1)} s)` +
          `${peerKeys.used < PEER_VERIFY_KEYS ? `, fewer than keygate's ${thousands(options.verifyKeys)} because ${thousands(PEER_VERIFY_KEYS)} took longer than ${PEER_PREPARE_MS / 1000} s` : ''}.`
        : ''),
  );
  out.push('');
  out.push(
    '| operation | keygate case | keygate req/s | p99 ms | better-auth req/s | p99 ms | keygate ÷ better-auth req/s |',
  );
  out.push('|---|---|---:|---:|---:|---:|---:|');
  for (const [operation, ours, peer] of measured) {
    const a = mediansOf(group(ours, 'empty'));
    const b = mediansOf(group(peer, OWN_DATABASE));
    out.push(
      `| ${operation} | ${ours} | ${thousands(a.rps)} | ${fixed(a.p99)} | ${thousands(b.rps)} | ${fixed(b.p99)} | ${fixed(a.rps / b.rps)} |`,
    );
  }
  return out;
}

/** A measured figure, how it reads in the table, and whether it meets its target. */
type TargetFigure = { text: string; met: boolean } | { missing: string } | { context: string };

/** The targets, one row each, from this run's medians (SQLite rows only). */
function renderTargets(input: ReportInput): string[] {
  const { runs, purge, options } = input;
  const sqlite = (name: CaseName, db: 'empty' | 'seeded' | typeof OWN_DATABASE) => {
    const list = runsOf(runs, name, db);
    return list.length > 0 ? mediansOf(list) : undefined;
  };
  const bigTable = options.seed >= 1_000_000;
  const notRun = (what: string) => ({ missing: `not measured in this run (needs ${what})` });
  const needsSeed = notRun('--seed 1000000');

  const oneUser = (): TargetFigure => {
    const held = sqlite('create by one user (500k keys)', 'empty');
    const none = sqlite('create by one user (0 keys)', 'empty');
    if (!held || !none) return notRun('the create by one user (0 keys) and (500k keys) cases');
    const ratio = held.rps / none.rps;
    return { text: fixed(ratio), met: ratio >= 0.9 };
  };
  const withMillion = (): TargetFigure => {
    if (!bigTable) return needsSeed;
    const names: CaseName[] = ['create via JWT', 'create via key', 'delete via JWT', 'delete via key'];
    const ratios = names.flatMap((name) => {
      const [big, empty] = [sqlite(name, 'seeded'), sqlite(name, 'empty')];
      return big && empty ? [{ name, ratio: big.rps / empty.rps }] : [];
    });
    if (ratios.length === 0) return notRun('the create and delete cases');
    ratios.sort((a, b) => a.ratio - b.ratio);
    const worst = ratios[0] as { name: CaseName; ratio: number };
    const others = ratios.slice(1).map((r) => `${r.name} ${fixed(r.ratio)}`);
    return {
      text: `${fixed(worst.ratio)} (worst: ${worst.name}${others.length > 0 ? `; ${others.join(', ')}` : ''})`,
      met: worst.ratio >= 0.9,
    };
  };
  const toCeiling = (name: CaseName): TargetFigure => {
    if (!bigTable) return needsSeed;
    if (options.verifyKeys < 10_000) return notRun('--verify-keys 10000');
    const big = sqlite(name, 'seeded');
    if (!big) return notRun(`the ${name} case`);
    return { text: fixed(big.ratio), met: big.ratio >= 0.7 };
  };
  const floor = (): TargetFigure => {
    const [create, durable] = [sqlite('create via JWT', 'empty'), sqlite('durable floor', OWN_DATABASE)];
    if (!create || !durable) return notRun('the create via JWT and durable floor cases');
    const ratio = create.rps / durable.rps;
    // Each round's two runs are ~20 s apart, the rounds minutes: what each round's pair gave.
    const rounds = roundByRound(
      runsOf(runs, 'create via JWT', 'empty'),
      runsOf(runs, 'durable floor', OWN_DATABASE),
    );
    return {
      text: `${fixed(ratio)} (${thousands(create.rps)} ÷ ${thousands(durable.rps)} req/s; by round ${rounds.map((r) => fixed(r)).join(', ')}, median ${fixed(median(rounds))})`,
      met: ratio >= 0.9,
    };
  };
  /** Create via JWT ÷ the durable floor doing a create's duties, and that floor ÷ the bare one. */
  const overDutiesFloor = (): TargetFigure => {
    const [create, durable] = [sqlite('create via JWT', 'empty'), sqlite('durable floor', OWN_DATABASE)];
    const duties = sqlite('durable floor + duties', 'empty');
    if (!create || !durable || !duties) {
      return notRun('the create via JWT, durable floor and durable floor + duties cases');
    }
    return {
      context: `${fixed(create.rps / duties.rps)}; the floor with duties itself ÷ the durable floor ${fixed(duties.rps / durable.rps)}`,
    };
  };
  const purgeAdded = (): TargetFigure => {
    if (!purge) return notRun('--purge');
    const [during, baseline] = [purge.during, purge.baseline];
    if (during.slices === 0 || baseline.slices === 0) {
      return { missing: 'no load slice fell during the purge' };
    }
    const added = during.worstMax - baseline.worstMax;
    const unfinished = purge.finished ? '' : '; the purge had NOT finished';
    return {
      text: `${fixed(added)} ms (${fixed(during.worstMax)} − ${fixed(baseline.worstMax)}: ${purge.compared}${unfinished})`,
      met: added <= 10,
    };
  };
  const worstP99 = (): TargetFigure => {
    const excluded: CaseName[] = [
      ...FAIRNESS_CASES,
      'durable floor',
      "durable floor on keygate's file",
      'durable floor + duties',
      'verify floor',
      'forward-auth floor',
      'verify floor + duties',
      'forward-auth floor + duties',
      'peer create (better-auth)',
      'peer verify (better-auth)',
    ];
    const rows = [...new Set(runs.map((r) => r.case))]
      .filter((name) => !excluded.includes(name))
      .flatMap((name) =>
        (['empty', 'seeded'] as const).flatMap((db) => {
          const m = sqlite(name, db);
          return m ? [{ name, db, ratio: m.p99Ratio }] : [];
        }),
      );
    if (rows.length === 0) return notRun('a keygate case');
    const worst = rows.reduce((a, b) => (b.ratio > a.ratio ? b : a));
    return {
      text: `${fixed(worst.ratio)} (${worst.name}, ${databaseLabel(worst.db, options.seed)})`,
      met: worst.ratio <= 3,
    };
  };

  /** A create on PostgreSQL ÷ the same create on SQLite, both from the empty database of this run. */
  const postgresOverSqlite = (): TargetFigure => {
    if (!options.postgres) return notRun('--postgres');
    const names: CaseName[] = ['create via JWT', 'create via key'];
    const ratios = names.flatMap((name) => {
      const [pg, lite] = [runsOf(runs, name, 'postgres'), runsOf(runs, name, 'empty')];
      if (pg.length === 0 || lite.length === 0) return [];
      const [pgRps, liteRps] = [mediansOf(pg).rps, mediansOf(lite).rps];
      const rounds = roundByRound(pg, lite).map((r) => fixed(r));
      return [{ name, ratio: pgRps / liteRps, pgRps, liteRps, rounds }];
    });
    if (ratios.length === 0) return notRun('the create via JWT or create via key case');
    ratios.sort((a, b) => a.ratio - b.ratio);
    const worst = ratios[0] as (typeof ratios)[number];
    const text = ratios
      .map(
        (r) =>
          `${r.name} ${fixed(r.ratio)} (${thousands(r.pgRps)} ÷ ${thousands(r.liteRps)} req/s; by round ${r.rounds.join(', ')})`,
      )
      .join('; ');
    return { text, met: worst.ratio >= 0.5 };
  };

  const fileFloor: CaseName = "durable floor on keygate's file";
  /** The durable floor on keygate's file with 1M keys ÷ on the empty one: what the size alone costs. */
  const floorWithMillion = (): TargetFigure => {
    if (!bigTable) return needsSeed;
    const [big, empty] = [sqlite(fileFloor, 'seeded'), sqlite(fileFloor, 'empty')];
    if (!big || !empty) return notRun(`the ${fileFloor} case`);
    return {
      context: `${fixed(big.rps / empty.rps)} (${thousands(big.rps)} ÷ ${thousands(empty.rps)} req/s)`,
    };
  };
  /** The least p99 a durable write had in this run: the durable floors' own, ÷ their ceiling's. */
  const floorP99 = (): TargetFigure => {
    const figures = [
      ['its own file', sqlite('durable floor', OWN_DATABASE)],
      ["keygate's empty file", sqlite(fileFloor, 'empty')],
      ["keygate's file with 1M keys", sqlite(fileFloor, 'seeded')],
    ] as const;
    const measured = figures.flatMap(([where, m]) => (m ? [`${fixed(m.p99Ratio)} (${where})`] : []));
    if (measured.length === 0) return notRun('the durable floor cases');
    return { context: measured.join(', ') };
  };

  /** keygate's case ÷ the floor of the same work on the same framework (what keygate's layers cost). */
  const overFloor = (name: CaseName, floorName: CaseName): TargetFigure => {
    const [ours, floorRun] = [sqlite(name, bigTable ? 'seeded' : 'empty'), sqlite(floorName, OWN_DATABASE)];
    if (!ours || !floorRun) return notRun(`the ${name} and ${floorName} cases`);
    return {
      context: `${fixed(ours.rps / floorRun.rps)}; the floor itself ÷ its ceiling ${fixed(floorRun.ratio)}`,
    };
  };

  /**
   * One case ÷ another on the same database, each first taken ÷ the ceiling measured around it: on a
   * shared host the load of others moves req/s by tens of percent between runs seconds apart, and the
   * ceiling moves with it. The medians' ratio is checked against `target`; the raw req/s and each
   * round's own ratio are shown beside it.
   */
  const overCase = (ours: CaseName, theirs: CaseName, db: string, target: number): TargetFigure => {
    const [a, b] = [runsOf(runs, ours, db), runsOf(runs, theirs, db)];
    const postgres = db === 'postgres' ? ' with --postgres' : '';
    if (a.length === 0 || b.length === 0) return notRun(`the ${ours} and ${theirs} cases${postgres}`);
    const [x, y] = [mediansOf(a), mediansOf(b)];
    const ratio = x.ratio / y.ratio;
    const rounds = a.flatMap((run) => {
      const other = b.find((r) => r.round === run.round);
      return other ? [run.rps / run.ceilingRps / (other.rps / other.ceilingRps)] : [];
    });
    return {
      text: `${fixed(ratio)} (÷ ceiling ${fixed(x.ratio)} against ${fixed(y.ratio)}; by round ${rounds.map((r) => fixed(r)).join(', ')}; req/s ${thousands(x.rps)} ÷ ${thousands(y.rps)} = ${fixed(x.rps / y.rps)})`,
      met: ratio >= target,
    };
  };
  /**
   * An A/B case on this build ÷ on the baseline's: in each round, each run ÷ the ceiling around it
   * (the two runs are a ceiling run apart), then the median of the rounds, checked against 0.97.
   */
  const overBaseline = (name: CaseName): TargetFigure => {
    if (input.baseline === undefined) return notRun('--baseline COMMIT');
    const [ours, theirs] = [runsOf(runs, name, 'empty'), runsOf(runs, name, 'empty', 'baseline')];
    if (ours.length === 0 || theirs.length === 0) return notRun(`the ${name} case`);
    const rounds = ours.flatMap((run) => {
      const other = theirs.find((r) => r.round === run.round);
      return other ? [run.rps / run.ceilingRps / (other.rps / other.ceilingRps)] : [];
    });
    const ratio = median(rounds);
    const [x, y] = [mediansOf(ours), mediansOf(theirs)];
    return {
      text: `${fixed(ratio)} (median of rounds ${rounds.map((r) => fixed(r)).join(', ')}; ÷ ceiling ${fixed(x.ratio)} against ${fixed(y.ratio)}; req/s ${thousands(x.rps)} ÷ ${thousands(y.rps)} = ${fixed(x.rps / y.rps)})`,
      met: ratio >= 0.97,
    };
  };
  const baselineName = input.baseline === undefined ? 'a baseline' : baselineLabel(input.baseline);
  /** The mixed case's latencies on each database it ran on. */
  const mixedLatencies = (): TargetFigure => {
    const name: CaseName = 'mixed 90/9/1 (verify/forward-auth/writes)';
    const measured = [...input.dbs].flatMap((db) => {
      const list = runsOf(runs, name, db);
      if (list.length === 0) return [];
      const m = mediansOf(list);
      return [
        `${databaseLabel(db, options.seed)}: ${thousands(m.rps)} req/s, p50 ${fixed(m.p50)} ms, p99 ${fixed(m.p99)} ms (${fixed(m.p99Ratio)}× the ceiling's)`,
      ];
    });
    return measured.length === 0 ? notRun(`the ${name} case`) : { context: measured.join('; ') };
  };

  const rows: Array<[string, TargetFigure, string]> = [
    ['create by one user holding 500k live keys ÷ by a user holding none', oneUser(), '≥ 0.9'],
    ['create and delete with 1M live keys ÷ empty database', withMillion(), '≥ 0.9'],
    ["  context: durable floor on keygate's file, 1M live keys ÷ empty", floorWithMillion(), ''],
    ['verify (key) ÷ ceiling POST, 1M live keys, 10k distinct keys', toCeiling('verify (key)'), '≥ 0.7'],
    ['forward-auth (key) ÷ ceiling GET, same conditions', toCeiling('forward-auth (key)'), '≥ 0.7'],
    ['  context: verify (key) ÷ verify floor', overFloor('verify (key)', 'verify floor'), ''],
    [
      "  context: verify (key) ÷ verify floor with keygate's duties",
      overFloor('verify (key)', 'verify floor + duties'),
      '',
    ],
    [
      '  context: forward-auth (key) ÷ forward-auth floor',
      overFloor('forward-auth (key)', 'forward-auth floor'),
      '',
    ],
    [
      "  context: forward-auth (key) ÷ forward-auth floor with keygate's duties",
      overFloor('forward-auth (key)', 'forward-auth floor + duties'),
      '',
    ],
    ['create via JWT ÷ durable floor (same run)', floor(), '≥ 0.9'],
    ["  context: create via JWT ÷ durable floor with keygate's duties", overDutiesFloor(), ''],
    [
      'create on PostgreSQL ÷ the same create on SQLite, empty databases (same run)',
      postgresOverSqlite(),
      '≥ 0.5',
    ],
    [
      'added max latency while purging 1M expired keys under create load (worst slice max − the same without a purge timer)',
      purgeAdded(),
      '≤ 10 ms',
    ],
    ...AB_CASES.map((name): [string, TargetFigure, string] => [
      `${name}, this build ÷ the build of ${baselineName}, plain keys (no limit), SQLite, interleaved`,
      overBaseline(name),
      '≥ 0.97',
    ]),
    [
      'verify of keys with their own rate limit ÷ without, 10k keys, SQLite',
      overCase('verify (key with rate limit)', 'verify (key)', 'empty', 0.85),
      '≥ 0.85',
    ],
    [
      'the same on PostgreSQL, two replicas, each key spread over both',
      overCase('verify (key with rate limit) 2 replicas', 'verify (key) 2 replicas', 'postgres', 0.5),
      '≥ 0.5',
    ],
    [
      'verify of keys with credits (each VALID takes one) ÷ without, SQLite',
      overCase('verify (key with credits)', 'verify (key)', 'empty', 0.5),
      '≥ 0.5',
    ],
    [
      'the same on PostgreSQL',
      overCase('verify (key with credits)', 'verify (key)', 'postgres', 0.3),
      '≥ 0.3',
    ],
    [
      'verify of keys with 20 permissions asked a 5-name query ÷ the same keys asked none, SQLite',
      overCase('verify (key with 20 permissions) asked 5', 'verify (key with 20 permissions)', 'empty', 0.95),
      '≥ 0.95',
    ],
    [
      'verify with usage recording ÷ without (the bench build)',
      overCase('verify (key) bench build', 'verify (key) bench build without usage recording', 'empty', 0.95),
      '≥ 0.95',
    ],
    ['  context: mixed load (90 % verify, 9 % forward-auth, 1 % writes)', mixedLatencies(), ''],
    ["worst case's p99 ÷ its ceiling p99", worstP99(), '≤ 3'],
    ["  context: the durable floors' p99 ÷ their ceiling p99", floorP99(), ''],
  ];
  const out: string[] = [];
  out.push('### Targets');
  out.push('');
  out.push(
    'From the medians above, SQLite rows only but the PostgreSQL ÷ SQLite row and the PostgreSQL limits and credits rows: the p99 row leaves out the PostgreSQL rows, the floors, the peer and the fairness cases.',
  );
  out.push('');
  out.push('| figure | this run | target | |');
  out.push('|---|---|---|---|');
  for (const [figure, value, target] of rows) {
    const [text, verdict] =
      'missing' in value
        ? [value.missing, '—']
        : 'context' in value
          ? [value.context, '']
          : [value.text, value.met ? 'met' : 'not met'];
    out.push(`| ${figure} | ${text} | ${target} | ${verdict} |`);
  }
  return out;
}

/** The report of one run: the figures of every case, the targets, and the tables beside them. */
export function renderReport(input: ReportInput): string {
  const { runs, dbs, options } = input;
  const out: string[] = [];
  out.push(`Run ${input.at.toISOString().slice(0, 16).replace('T', ' ')} UTC — ${input.machine}`);
  out.push('');
  out.push(
    `keygate (compiled, synchronous=FULL, LOG_LEVEL=${options.logLevel} to a file) and the ceiling on CPU 0, wrk -t1 -c${options.connections} on CPU 1; ` +
      `${options.rounds} rounds of ${options.duration} s per case after ${options.warmup} s warm-up, fresh keygate and database per case; medians over rounds. ` +
      `Ratios are to the mean of the two ceiling runs around each keygate run: ${ceilingNote(runs)}. ` +
      `${options.users} users (tokens / caller keys) in rotation; verify and forward-auth rotate over ${thousands(options.verifyKeys)} other distinct keys, seeded in every database; MAX_KEYS_PER_USER default.` +
      (input.baseline === undefined
        ? ''
        : ` ${AB_CASES.join(' and ')} also ran on the build of ${baselineLabel(input.baseline)} (its own worktree, install and build), on the same keys in a database of its own schema (made by its own \`keygate migrate\`), beside this build's run in every round, the two taking turns to go first.`),
  );
  out.push('');
  out.push(
    '| case | database | req/s | p50 ms | p99 ms | max ms | non-2xx | ÷ ceiling req/s | p99 ÷ ceiling p99 |',
  );
  out.push('|---|---|---:|---:|---:|---:|---:|---:|---:|');
  // The fairness cases' figures are another user's, beside a heavy load: they get their own table.
  const names = [...new Set(runs.map((r) => r.case))].filter((name) => !FAIRNESS_CASES.includes(name));
  const group = (name: CaseName, db: string) => runsOf(runs, name, db);
  for (const name of names) {
    for (const db of [...dbs, OWN_DATABASE]) {
      if (group(name, db).length === 0) continue;
      const m = mediansOf(group(name, db));
      const dbLabel = databaseLabel(db, options.seed);
      out.push(
        `| ${name} | ${dbLabel} | ${thousands(m.rps)} | ${fixed(m.p50)} | ${fixed(m.p99)} | ${fixed(m.max)} | ${thousands(m.non2xx)} | ${fixed(m.ratio)} | ${fixed(m.p99Ratio)} |`,
      );
      const before = runsOf(runs, name, db, 'baseline');
      if (before.length > 0 && input.baseline !== undefined) {
        const b = mediansOf(before);
        out.push(
          `| ${name} on the baseline ${baselineLabel(input.baseline)} | ${dbLabel}, its schema | ${thousands(b.rps)} | ${fixed(b.p50)} | ${fixed(b.p99)} | ${fixed(b.max)} | ${thousands(b.non2xx)} | ${fixed(b.ratio)} | ${fixed(b.p99Ratio)} |`,
        );
      }
    }
  }
  const postCeilings = runs.filter((r) => r.ceiling === 'POST');
  out.push(
    `| ceiling POST | — | ${thousands(median(postCeilings.map((r) => r.ceilingRps)))} | | ${fixed(median(postCeilings.map((r) => r.ceilingP99)))} | | | 1.00 | 1.00 |`,
  );
  const gets = input.ceilingGets;
  out.push(
    `| ceiling GET | — | ${thousands(median(gets.map((g) => g.rps)))} | ${fixed(median(gets.map((g) => g.p50)))} | ${fixed(median(gets.map((g) => g.p99)))} | ${fixed(median(gets.map((g) => g.max)))} | ${median(gets.map((g) => g.non2xx))} | | |`,
  );
  out.push('');
  out.push(
    'non-2xx of the 403 case is every request (expected); elsewhere it should be 0. The delete cases seed their keys to delete ' +
      '(1.5 × the larger of 30k/s and the round\'s best create rate × the run time, owned round-robin by the users) before keygate starts, so their "empty" database holds those.',
  );
  out.push('', ...renderTargets(input));
  if (dbs.includes('seeded')) {
    out.push('');
    out.push(
      `With ${thousands(options.seed)} live keys ÷ empty (medians; req/s wants ≥ 0.9, latencies ≤ 1.11):`,
    );
    out.push('');
    out.push('| case | req/s | p50 | p99 | max |');
    out.push('|---|---:|---:|---:|---:|');
    for (const name of names.filter((n) => group(n, 'seeded').length > 0)) {
      const a = mediansOf(group(name, 'seeded'));
      const b = mediansOf(group(name, 'empty'));
      out.push(
        `| ${name} | ${fixed(a.rps / b.rps)} | ${fixed(a.p50 / b.p50)} | ${fixed(a.p99 / b.p99)} | ${fixed(a.max / b.max)} |`,
      );
    }
  }
  const fairness = renderFairness(input);
  if (fairness.length > 0) out.push('', ...fairness);
  const peer = renderPeer(input);
  if (peer.length > 0) out.push('', ...peer);
  if (input.purge) {
    const p = input.purge;
    const [during, baseline] = [p.during, p.baseline];
    const count = (phase: SlicePhase) => p.slices.filter((s) => s.phase === phase).length;
    out.push('');
    out.push(
      (p.finished
        ? `Purge: ${thousands(p.removed)} expired keys removed by keygate's own timer in ${thousands(p.purgeMs)} ms under create-via-JWT load `
        : `Purge: keygate's own timer had NOT finished: ${thousands(p.removed)} of ${thousands(PURGE_KEYS)} expired keys removed after ${thousands(p.purgeMs)} ms of create-via-JWT load `) +
        `(1-s slices: ${count('before')} before, ${count('during')} during, ${count('after')} after). ` +
        `Baseline: the same load for as many slices on another copy of the same database, purge timer off (PURGE_INTERVAL_SECONDS=${NO_PURGE_INTERVAL_SECONDS}; ${thousands(p.baselineRemoved)} keys removed); ` +
        `its slices at the same positions as those during the purge, ${baseline.slices} of them, beside the ${during.slices} during (neither run's first slice, keygate's warm-up). ` +
        `During vs baseline: worst slice max ${fixed(during.worstMax)} vs ${fixed(baseline.worstMax)} ms; median slice max ${fixed(during.medianMax)} vs ${fixed(baseline.medianMax)} ms; ` +
        `slice p99 worst ${fixed(during.worstP99)} vs ${fixed(baseline.worstP99)} ms, median ${fixed(during.medianP99)} vs ${fixed(baseline.medianP99)} ms; median req/s ${thousands(during.rps)} vs ${thousands(baseline.rps)}.`,
    );
  }
  out.push('');
  const mb = (kb: number) => `${fixed(kb / 1024, 1)} MB`;
  const memoryLine = Object.entries(input.memory)
    .map(([db, m]) => `${db}: idle ${mb(median(m.idleKb))}, peak ${mb(Math.max(...m.peakKb))}`)
    .join('; ');
  out.push(
    `Start-up (process start to first /health 200, fresh database, median of ${options.startups}): ${fixed(input.startup.medianMs, 1)} ms ` +
      `(min ${fixed(input.startup.minMs, 1)}, max ${fixed(input.startup.maxMs, 1)}). Binary ${fixed(input.binaryBytes / 1e6, 1)} MB. RSS ${memoryLine}.`,
  );
  return out.join('\n');
}

const DATABASE_LABELS: Record<string, string> = {
  empty: 'empty',
  postgres: 'empty, PostgreSQL',
  [OWN_DATABASE]: 'its own SQLite file',
};

function databaseLabel(db: string, seed: number): string {
  return DATABASE_LABELS[db] ?? `${thousands(seed)} keys`;
}

/** Which ceiling each case's ratio is to, for the report's opening paragraph. */
function ceilingNote(runs: Run[]): string {
  const onGet = [...new Set(runs.filter((r) => r.ceiling === 'GET').map((r) => r.case))];
  return onGet.length === 0
    ? 'ceiling POST'
    : `ceiling GET for ${onGet.join(', ')}, ceiling POST for the rest`;
}
