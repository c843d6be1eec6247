// The decision table is written once per language: TypeScript's (packages/client/src/decision.ts) and
// Python's (clients/python/keygate/decision.py) give each code the same status and sentence.
import { expect, it } from 'bun:test';
import { join } from 'node:path';
import { REFUSALS, UNAVAILABLE_RETRY_AFTER } from '../../packages/client/src/decision';

it('Python and TypeScript decide every code alike', () => {
  const printed = Bun.spawnSync(
    [
      '/usr/bin/python3',
      '-c',
      'import json; from keygate.decision import REFUSALS, UNAVAILABLE_RETRY_AFTER as R; print(json.dumps({"refusals": {c: {"status": s, "error": e} for c, (s, e) in REFUSALS.items()}, "retryAfter": R}))',
    ],
    { cwd: join(import.meta.dir, '..', '..', 'clients', 'python'), stderr: 'pipe' },
  );
  expect(printed.stderr.toString()).toBe('');
  expect(JSON.parse(printed.stdout.toString())).toEqual({
    refusals: REFUSALS,
    retryAfter: UNAVAILABLE_RETRY_AFTER,
  });
});
