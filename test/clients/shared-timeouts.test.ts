// The middleware's calls to keygate share a timeout timer among those that start close together
// (packages/client/src/guard.ts); the table's "keygate too slow" case shows the timeout ending a call.
import { expect, it } from 'bun:test';
import { sharedTimeouts } from '../../packages/client/src/guard';

it('calls within 10 ms share a signal; a later call, or the 101st, gets a new one', () => {
  let now = 1_000;
  const timeout = sharedTimeouts(2_000, () => now);
  const first = timeout();
  now += 9.9;
  expect(timeout()).toBe(first);
  now += 0.1;
  const second = timeout();
  expect(second).not.toBe(first);
  for (let call = 2; call <= 100; call++) expect(timeout()).toBe(second);
  expect(timeout()).not.toBe(second);
});

it('a signal is not aborted when handed out', () => {
  const timeout = sharedTimeouts(0, () => 0);
  expect(timeout().aborted).toBe(false);
});
