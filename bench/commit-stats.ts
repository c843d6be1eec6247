// A --preload for bench/profile.ts: counts group-commit batches, jobs per batch and the time spent in
// COMMIT (the WAL fsync), and writes them to bench/.run/commit-stats.txt when keygate gets SIGTERM.
//   PROFILE_PRELOAD=$PWD/bench/commit-stats.ts flock /tmp/keygate-load.lock bun bench/profile.ts create-jwt
import { Database } from 'bun:sqlite';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GroupCommitWriter } from '../src/db/group-commit';

const writer = GroupCommitWriter.prototype as unknown as { commit(jobs: unknown[]): unknown };
const commit = writer.commit;
const run = Database.prototype.run;
let batches = 0;
let jobs = 0;
let batchMs = 0;
let commitMs = 0;

writer.commit = function (this: unknown, queued: unknown[]) {
  batches++;
  jobs += queued.length;
  const started = performance.now();
  const outcome = commit.call(this, queued);
  batchMs += performance.now() - started;
  return outcome;
};

Database.prototype.run = function (this: Database, sql: string, ...rest: unknown[]) {
  if (sql !== 'COMMIT') return (run as (...args: unknown[]) => unknown).call(this, sql, ...rest);
  const started = performance.now();
  const result = (run as (...args: unknown[]) => unknown).call(this, sql, ...rest);
  commitMs += performance.now() - started;
  return result;
} as typeof run;

process.on('SIGTERM', () => {
  writeFileSync(
    join(import.meta.dir, '.run', 'commit-stats.txt'),
    `batches ${batches}, jobs ${jobs} (${(jobs / batches).toFixed(1)} a batch); ` +
      `per batch ${(batchMs / batches).toFixed(3)} ms in the transaction, ${(commitMs / batches).toFixed(3)} ms in COMMIT\n`,
  );
});
