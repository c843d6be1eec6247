// Random queries and holders against plain references (fast-check, fixed seed): a query either
// parses and answers a boolean, or is refused with a PermissionQueryError saying where, never any
// other throw; it is refused exactly when the reference refuses it and, when it parses, agrees with
// the reference on every holder. Coverage and granting agree with their references too.
import { describe, expect, it } from 'bun:test';
import fc from 'fast-check';
import { grants, heldPermissions, holds } from '../../src/permissions/held';
import { PermissionQueryError, parsePermissionQuery } from '../../src/permissions/query';
import {
  ASKED_NAMES,
  HELD_POOL,
  heldList,
  randomQuery,
  referenceGrants,
  referenceHolds,
  referenceQuery,
} from './random-queries';

const RUNS = { seed: 20261128, numRuns: 3000 };

/** The outcome of parsing: the query, or the refusal's message; anything else thrown fails the test. */
function outcome(text: string) {
  try {
    return { query: parsePermissionQuery(text) };
  } catch (error) {
    expect(error).toBeInstanceOf(PermissionQueryError);
    return { refusal: (error as PermissionQueryError).message };
  }
}

describe('random permission queries', () => {
  it('parse into a query answering a boolean, or are refused with a PermissionQueryError', () => {
    fc.assert(
      fc.property(randomQuery, heldList, (text, held) => {
        const { query } = outcome(text);
        if (query !== undefined) expect(typeof query.satisfiedBy(heldPermissions(held))).toBe('boolean');
      }),
      RUNS,
    );
  });

  it('are refused with one sentence naming a character inside the query, when it has one', () => {
    fc.assert(
      fc.property(randomQuery, (text) => {
        const { refusal } = outcome(text);
        if (refusal === undefined) return;
        expect(refusal).toStartWith('The permissions query ');
        expect(refusal).toEndWith('.');
        const at = /at character (\d+) /.exec(refusal);
        if (at !== null) {
          expect(Number(at[1])).toBeGreaterThanOrEqual(1);
          expect(Number(at[1])).toBeLessThanOrEqual(text.length);
        }
      }),
      RUNS,
    );
  });

  it('are refused exactly when the reference refuses them', () => {
    let parsed = 0;
    fc.assert(
      fc.property(randomQuery, (text) => {
        const reference = referenceQuery(text);
        const { query } = outcome(text);
        expect(query === undefined).toBe(reference === undefined);
        if (query !== undefined) parsed++;
        expect(query?.names).toEqual(reference?.names);
      }),
      RUNS,
    );
    // Not vacuous: a good share of the random queries were valid.
    expect(parsed).toBeGreaterThan(RUNS.numRuns / 5);
  });

  it('are satisfied exactly when the reference is satisfied, for random holders', () => {
    fc.assert(
      fc.property(
        randomQuery.filter((text) => referenceQuery(text) !== undefined),
        fc.array(heldList, { minLength: 1, maxLength: 8 }),
        (text, holders) => {
          const query = parsePermissionQuery(text);
          const reference = referenceQuery(text);
          for (const held of holders) {
            expect(query.satisfiedBy(heldPermissions(held))).toBe(reference?.satisfiedBy(held) as boolean);
          }
        },
      ),
      RUNS,
    );
  });
});

/** Names and held entries built from segments, so that prefixes, dots and near misses are common. */
const segment = fc.constantFrom('a', 'b', 'documents', 'comments', 'x-y', 'c:d', 'A', '');
const randomName = fc
  .array(segment, { minLength: 1, maxLength: 4 })
  .map((segments) => segments.join('.'))
  .filter((name) => name.length > 0);
const randomHeldEntry = fc.oneof(
  randomName,
  randomName.map((name) => `${name}.*`),
  fc.constant('*'),
  fc.constantFrom(...HELD_POOL),
);
const randomHeld = fc.array(randomHeldEntry, { maxLength: 6 });

describe('random holders', () => {
  it('cover an asked name exactly when the reference says so', () => {
    fc.assert(
      fc.property(randomHeld, fc.oneof(randomName, fc.constantFrom(...ASKED_NAMES)), (held, name) => {
        expect(holds(heldPermissions(held), name)).toBe(referenceHolds(held, name));
      }),
      RUNS,
    );
  });

  it('may grant a permission or a wildcard exactly when the reference says so', () => {
    fc.assert(
      fc.property(randomHeld, randomHeldEntry, (held, granted) => {
        expect(grants(heldPermissions(held), granted)).toBe(referenceGrants(held, granted));
      }),
      RUNS,
    );
  });
});
