// A --preload for bench/profile.ts: counts group-commit batches, jobs per batch and the time spent in
// COMMIT (the WAL fsync), and writes them to bench/.run/commit-stats.txt when keygate gets SIGTERM.
//   PROFILE_PRELOAD=$PWD/bench/commit-stats.ts flock /tmp/keygate-load.lock bun bench/profile.ts create-jwt
import { Database } from 'bun:sqlite';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GroupCommitWriter } from '../src/db/sqlite/group-commit';

const writer = GroupCommitWriter.prototype as unknown as { commit(jobs: unknown[]): unknown };
const commit = writer.commit;
const prepare = Database.prototype.prepare;
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

// The writer prepares its COMMIT once: time every run of a prepared 'COMMIT' statement.
Database.prototype.prepare = function (this: Database, sql: string, ...rest: unknown[]) {
  const statement = (prepare as (...args: unknown[]) => ReturnType<typeof prepare>).call(this, sql, ...rest);
  if (sql !== 'COMMIT') return statement;
  const runCommit = statement.run.bind(statement);
  statement.run = ((...args: unknown[]) => {
    const started = performance.now();
    const result = (runCommit as (...a: unknown[]) => unknown)(...args);
    commitMs += performance.now() - started;
    return result;
  }) as typeof statement.run;
  return statement;
} as typeof prepare;

process.on('SIGTERM', () => {
  writeFileSync(
    join(import.meta.dir, '.run', 'commit-stats.txt'),
    `batches ${batches}, jobs ${jobs} (${(jobs / batches).toFixed(1)} a batch); ` +
      `per batch ${(batchMs / batches).toFixed(3)} ms in the transaction, ${(commitMs / batches).toFixed(3)} ms in COMMIT\n`,
  );
});
