// The load benchmark's options: flags of `bun run bench`, each also a BENCH_* environment variable
// (BENCH_DURATION, BENCH_VERIFY_KEYS, ...); a flag wins over its variable.

export type Options = {
  duration: number;
  warmup: number;
  rounds: number;
  connections: number;
  users: number;
  seed: number;
  /** Distinct keys the verify and forward-auth cases rotate over (in every database). */
  verifyKeys: number;
  purge: boolean;
  metrics: boolean;
  postgres: boolean;
  logLevel: string;
  build: boolean;
  startups: number;
  /**
   * Only the cases whose name contains one of these (comma-separated), except that an entry which is a
   * case's whole name selects that case alone; empty: all.
   */
  cases: string[];
  /**
   * A commit (anything `git worktree add` takes) whose own build also runs the A/B cases (verify (key),
   * forward-auth (key)), interleaved with this build's in every round; empty: none.
   */
  baseline: string;
};

export function parseOptions(argv: string[], environment: Record<string, string | undefined>): Options {
  const env = (name: string, fallback: string) => environment[`BENCH_${name}`] || fallback;
  const options: Options = {
    duration: Number(env('DURATION', '4')),
    // 3 s: the ceiling stays up (and warm) for the whole run, while each case starts a fresh server
    // that compiles its hot path on the same core in its first seconds; after 1 s keygate's verify was
    // 0.84-0.88 of its duties floor, after 3-5 s 0.95-0.99 (bench/HISTORY.md).
    warmup: Number(env('WARMUP', '3')),
    rounds: Number(env('ROUNDS', '3')),
    connections: Number(env('CONNECTIONS', '64')),
    users: Number(env('USERS', '1000')),
    seed: Number(env('SEED', '0')),
    verifyKeys: Number(env('VERIFY_KEYS', '10000')),
    purge: env('PURGE', '') === '1',
    metrics: env('METRICS', '') === '1',
    postgres: env('POSTGRES', '') === '1',
    logLevel: env('LOG_LEVEL', 'info'),
    build: env('BUILD', '1') !== '0',
    startups: Number(env('STARTUPS', '20')),
    cases: env('CASES', '').split(',').filter(Boolean),
    baseline: env('BASELINE', ''),
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const value = () => {
      const next = argv[++i];
      if (next === undefined) throw new Error(`${arg} needs a value`);
      return next;
    };
    if (arg === '--purge') options.purge = true;
    else if (arg === '--metrics') options.metrics = true;
    else if (arg === '--postgres') options.postgres = true;
    else if (arg === '--no-build') options.build = false;
    else if (arg === '--duration') options.duration = Number(value());
    else if (arg === '--warmup') options.warmup = Number(value());
    else if (arg === '--rounds') options.rounds = Number(value());
    else if (arg === '--connections') options.connections = Number(value());
    else if (arg === '--users') options.users = Number(value());
    else if (arg === '--seed') options.seed = Number(value());
    else if (arg === '--verify-keys') options.verifyKeys = Number(value());
    else if (arg === '--startups') options.startups = Number(value());
    else if (arg === '--log-level') options.logLevel = value();
    else if (arg === '--cases') options.cases = value().split(',').filter(Boolean);
    else if (arg === '--baseline') options.baseline = value();
    else throw new Error(`unknown option ${arg}`);
  }
  for (const [name, number] of Object.entries(options)) {
    if (typeof number === 'number' && !(Number.isInteger(number) && number >= 0 && number <= 100_000_000)) {
      throw new Error(`--${name} must be a whole number`);
    }
  }
  // --rounds 0 skips the cases (with --purge: the purge measurement alone).
  if (options.duration < 1 || options.users < 1 || options.connections < 1 || options.verifyKeys < 1) {
    throw new Error('--duration, --users, --connections and --verify-keys must be at least 1');
  }
  return options;
}

/** Whether `--cases` selects the case `name` (see Options.cases; `names`: every case's name). */
export function selectsCase(wanted: readonly string[], name: string, names: readonly string[]): boolean {
  if (wanted.length === 0) return true;
  return wanted.some((entry) => (names.includes(entry) ? entry === name : name.includes(entry)));
}
