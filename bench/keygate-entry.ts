// The bench's own build of keygate (compiled by bench/run.ts beside dist/keygate, with the same flags):
// `serve` with the settings of the environment, exactly as the product runs it, except that
// BENCH_USAGE_RECORDING=off leaves the recording of last use and usage history out, so the bench can
// measure what recording costs a verification. The variable is the bench's, not a keygate setting.

import { runServer } from '../src/cli/run-server';
import { loadConfig } from '../src/config';

const recordUsage = process.env.BENCH_USAGE_RECORDING !== 'off';

runServer(loadConfig(process.env), { recordUsage }).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `keygate (bench build): ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(2);
  },
);
