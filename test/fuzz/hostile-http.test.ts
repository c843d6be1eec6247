// Hostile HTTP input, briefly: a fixed-seed slice of the property scripts/experiments/fuzz.ts runs at length.
import { expect, it } from 'bun:test';
import fc from 'fast-check';
import { hostileHttpProperty, newStats } from './hostile-http';

it('keeps every invariant under random and mutated requests on every endpoint', async () => {
  const stats = newStats();
  await fc.assert(hostileHttpProperty(stats), { seed: 20261122, numRuns: 150, endOnFailure: true });
  expect(stats.requests).toBeGreaterThan(1000);
  // Not vacuous: keys were created and deleted along the way, so the database check had work to do.
  expect(stats.statuses[201]).toBeGreaterThan(20);
  expect(stats.statuses[204]).toBeGreaterThan(5);
  // The newer routes too: each answered its success status often enough to judge.
  expect(stats.routes.verify?.[200]).toBeGreaterThan(20);
  expect(stats.routes['forward-auth']?.[200]).toBeGreaterThan(20);
  expect(stats.routes['forward-auth']?.[403]).toBeGreaterThan(20);
  expect(stats.routes.list?.[200]).toBeGreaterThan(10);
  expect(stats.routes.get?.[200]).toBeGreaterThan(10);
  expect(stats.routes.rotate?.[201]).toBeGreaterThan(10);
}, 20_000);
