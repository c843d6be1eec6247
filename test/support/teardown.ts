// Preloaded by `bun test` (bunfig.toml): stops the run's throwaway PostgreSQL, if the run started one,
// once every test file has finished.
import { afterAll } from 'bun:test';
import { stopSharedPostgres } from './postgres';

// Removing a few hundred test databases (~7.5 MB each) takes seconds.
afterAll(() => stopSharedPostgres(), 60_000);
