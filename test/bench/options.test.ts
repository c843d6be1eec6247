// The bench's options: its defaults, BENCH_* variables, flags over variables, and refused values.
import { describe, expect, it } from 'bun:test';
import { parseOptions, selectsCase } from '../../bench/options';

describe('bun run bench options', () => {
  it('defaults to the recorded settings', () => {
    expect(parseOptions([], {})).toEqual({
      duration: 4,
      warmup: 3,
      rounds: 3,
      connections: 64,
      users: 1000,
      seed: 0,
      verifyKeys: 10_000,
      purge: false,
      metrics: false,
      postgres: false,
      logLevel: 'info',
      build: true,
      startups: 20,
      cases: [],
      baseline: '',
    });
  });

  it('reads BENCH_* variables, and a flag wins over its variable', () => {
    const options = parseOptions(['--duration', '2', '--no-build', '--cases', 'verify,forward'], {
      BENCH_DURATION: '9',
      BENCH_ROUNDS: '1',
      BENCH_PURGE: '1',
    });
    expect(options).toMatchObject({
      duration: 2,
      rounds: 1,
      purge: true,
      build: false,
      cases: ['verify', 'forward'],
    });
  });

  it('takes the A/B baseline from --baseline or BENCH_BASELINE', () => {
    expect(parseOptions(['--baseline', '657c95d'], {}).baseline).toBe('657c95d');
    expect(parseOptions([], { BENCH_BASELINE: 'main~3' }).baseline).toBe('main~3');
  });

  it("selects the cases whose name holds an entry, but an entry that is a case's whole name selects it alone", () => {
    const names = [
      'verify (key)',
      'verify (key) bench build',
      'verify (key with rate limit)',
      'forward-auth (key)',
    ];
    const selected = (wanted: string[]) => names.filter((name) => selectsCase(wanted, name, names));
    expect(selected([])).toEqual(names);
    expect(selected(['verify (key'])).toEqual(names.slice(0, 3));
    expect(selected(['verify (key)', 'forward-auth (key)'])).toEqual(['verify (key)', 'forward-auth (key)']);
    expect(selected(['bench', 'forward'])).toEqual(['verify (key) bench build', 'forward-auth (key)']);
  });

  it('refuses an unknown flag, a flag without its value, and a number that is not whole', () => {
    expect(() => parseOptions(['--fast'], {})).toThrow('unknown option --fast');
    expect(() => parseOptions(['--rounds'], {})).toThrow('--rounds needs a value');
    expect(() => parseOptions(['--duration', '1.5'], {})).toThrow('--duration must be a whole number');
    expect(() => parseOptions(['--users', '0'], {})).toThrow(
      '--duration, --users, --connections and --verify-keys must be at least 1',
    );
  });
});
