// Hostile key settings, briefly: a fixed-seed slice of the property scripts/experiments/fuzz.ts runs at length.
import { expect, it } from 'bun:test';
import fc from 'fast-check';
import { keySettingsProperty, newSettingsStats } from './key-settings-http';

it('keeps every invariant under hostile settings, updates, usage queries and costs', async () => {
  const stats = newSettingsStats();
  await fc.assert(keySettingsProperty(stats), { seed: 20261125, numRuns: 100, endOnFailure: true });
  expect(stats.requests).toBeGreaterThan(500);
  // Not vacuous: each route answered success and refusal often enough to judge, and the model judged.
  expect(stats.routes.create?.[201]).toBeGreaterThan(20);
  expect(stats.routes.create?.[400]).toBeGreaterThan(20);
  expect(stats.routes.update?.[200]).toBeGreaterThan(10);
  expect(stats.routes.update?.[400]).toBeGreaterThan(20);
  expect(stats.routes.usage?.[200]).toBeGreaterThan(2);
  expect(stats.routes.verify?.[200]).toBeGreaterThan(20);
  expect(stats.routes.verify?.[400]).toBeGreaterThan(5);
  expect(stats.judged).toBeGreaterThan(200);
}, 30_000);
