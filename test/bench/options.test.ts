// The bench's options: its defaults, BENCH_* variables, flags over variables, and refused values.
import { describe, expect, it } from 'bun:test';
import { parseOptions } from '../../bench/options';

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

  it('refuses an unknown flag, a flag without its value, and a number that is not whole', () => {
    expect(() => parseOptions(['--fast'], {})).toThrow('unknown option --fast');
    expect(() => parseOptions(['--rounds'], {})).toThrow('--rounds needs a value');
    expect(() => parseOptions(['--duration', '1.5'], {})).toThrow('--duration must be a whole number');
    expect(() => parseOptions(['--users', '0'], {})).toThrow(
      '--duration, --users, --connections and --verify-keys must be at least 1',
    );
  });
});
