// Preloaded by `bun test` (bunfig.toml): with KEYGATE_TEST_DATABASE=postgres, starts the run's
// throwaway PostgreSQL before the first test file, under a timeout of its own (initdb and the
// migrated template take seconds, more on a busy machine, than a test hook's 5 s allow), and stops
// it once every test file has finished.
import { afterAll, beforeAll } from 'bun:test';
import { sharedPostgres, stopSharedPostgres, TEST_ENGINE } from './postgres';

beforeAll(async () => {
  if (TEST_ENGINE === 'postgres') await sharedPostgres();
}, 180_000);

// Removing a few hundred test databases (~7.5 MB each, gigabytes in all) takes seconds, and more than
// a minute on a busy disk.
afterAll(() => stopSharedPostgres(), 300_000);
