// The lists a key or a user policy may hold: which are taken, and the one sentence naming the
// first problem of those that are not; and which names a query may ask for.
import { describe, expect, it } from 'bun:test';
import { heldPermissionsOf, permissionsOf } from '../../src/apikeys/settings';
import type { ApiKeyRow } from '../../src/apikeys/store';
import { holds } from '../../src/permissions/held';
import { heldPermissionsProblem, isPermissionName, PERMISSION_RULE } from '../../src/permissions/names';

const names = (count: number) => Array.from({ length: count }, (_, i) => `p${i}`);

describe('a held list that is taken', () => {
  it.each([
    [['documents.read']],
    [['*']],
    [['documents.*']],
    [['documents.comments.*', 'documents.read', '*']],
    [['billing:write', 'repo/x-y', 'A_b.C-9']],
    [['x'.repeat(128)]],
    [[`${'x'.repeat(126)}.*`]],
    [names(100)],
  ])('%j', (list) => {
    expect(heldPermissionsProblem(list)).toBeUndefined();
  });
});

describe('a held list that is refused', () => {
  it.each([
    [undefined, 'permissions must be an array of 1 to 100 permissions, not undefined.'],
    [null, 'permissions must be an array of 1 to 100 permissions, not null.'],
    ['documents.read', 'permissions must be an array of 1 to 100 permissions, not a string.'],
    [{ 0: 'a' }, 'permissions must be an array of 1 to 100 permissions, not an object.'],
    [[], 'permissions must hold at least 1 permission.'],
    [names(101), 'permissions holds 101 permissions; at most 100 are allowed.'],
  ])('%j: not a list of 1 to 100', (value, sentence) => {
    expect(heldPermissionsProblem(value)).toBe(sentence);
  });

  it.each([
    [['a', 'b', 'a'], 'permissions[2] "a" repeats permissions[0].'],
    [['documents.*', 'x', 'documents.*'], 'permissions[2] "documents.*" repeats permissions[0].'],
  ])('%j: holds a permission twice', (list, sentence) => {
    expect(heldPermissionsProblem(list)).toBe(sentence);
  });

  it.each([
    [['a', 1], 'permissions[1] must be a string, not a number.'],
    [[null], 'permissions[0] must be a string, not null.'],
    [[['a']], 'permissions[0] must be a string, not an array.'],
    [[{}], 'permissions[0] must be a string, not an object.'],
    [[true], 'permissions[0] must be a string, not a boolean.'],
  ])('%j: holds something other than a string', (list, sentence) => {
    expect(heldPermissionsProblem(list)).toBe(sentence);
  });

  it.each([
    ['', 'permissions[0] "" is empty; a permission is 1 to 128 characters.'],
    [
      'x'.repeat(129),
      `permissions[0] "${'x'.repeat(40)}…" is 129 characters long; a permission is at most 128 (".*" included).`,
    ],
    [
      `${'x'.repeat(127)}.*`,
      `permissions[0] "${'x'.repeat(40)}…" is 129 characters long; a permission is at most 128 (".*" included).`,
    ],
    ['.*', 'permissions[0] ".*" names nothing before ".*"; "*" alone holds every permission.'],
  ])('%j: a permission too short or too long', (entry, sentence) => {
    expect(heldPermissionsProblem([entry])).toBe(sentence);
  });

  it.each([
    ['a*', 2],
    ['*.read', 1],
    ['a.*.b', 3],
    ['**', 1],
    ['docs.**', 6],
    ['*a', 1],
    ['documents*', 10],
  ])('%j: a wildcard anywhere but alone or after a final "." (character %d)', (entry, at) => {
    expect(heldPermissionsProblem(['ok', entry])).toBe(
      `permissions[1] ${JSON.stringify(entry)} has "*" at character ${at}; ` +
        '"*" may only stand alone ("*") or end a permission after "." ("documents.*").',
    );
  });

  it.each([
    ['a b', ' ', 2],
    ['docs#read', '#', 5],
    ['é', 'é', 1],
    ['a\u0000', '\\u0000', 2],
    ['docs\\read', '\\\\', 5],
    ['😀.*', '😀', 1],
  ])('%j: a character no permission holds', (entry, character, at) => {
    expect(heldPermissionsProblem([entry])).toBe(
      `permissions[0] ${JSON.stringify(entry)} has "${character}" at character ${at}; ` +
        'a permission holds only A–Z a–z 0–9 . _ : - /.',
    );
  });

  it('names the property it was given', () => {
    expect(heldPermissionsProblem(['a*'], 'policy.permissions')).toStartWith('policy.permissions[0] "a*" ');
    expect(heldPermissionsProblem([], 'policy.permissions')).toBe(
      'policy.permissions must hold at least 1 permission.',
    );
  });

  it('quotes at most 40 characters of a long entry', () => {
    expect(heldPermissionsProblem([`${'x'.repeat(50)}#`])).toStartWith(
      `permissions[0] "${'x'.repeat(40)}…" has`,
    );
  });

  it('names the first problem in the list', () => {
    expect(heldPermissionsProblem(['a', 'b*', 1, 'a'])).toStartWith('permissions[1] "b*"');
  });
});

describe('the rule a refusal can quote', () => {
  it('is one sentence naming the bounds, the characters and both wildcards', () => {
    expect(PERMISSION_RULE).toEndWith('.');
    for (const piece of ['1 to 100 distinct', '1 to 128', 'A–Z a–z 0–9 . _ : - /', '".*"', '"*"']) {
      expect(PERMISSION_RULE).toContain(piece);
    }
  });
});

describe('a name a query may ask for', () => {
  it.each([
    ['documents.read', true],
    ['billing:write', true],
    ['repo/x-y', true],
    ['A_b.9', true],
    ['doc.', true],
    ['x'.repeat(128), true],
    ['', false],
    ['x'.repeat(129), false],
    ['documents.*', false],
    ['*', false],
    ['a b', false],
    ['é', false],
  ])('%j: %p', (text, expected) => {
    expect(isPermissionName(text)).toBe(expected);
  });
});

describe('a stored list, as keys read it', () => {
  const row = (permissions: string | null) =>
    ({ id: 'k', userId: 1, level: 0, name: 'n', createdAt: 0, expiresAt: 1, permissions }) as ApiKeyRow;

  it('is parsed and compiled once for every key that stores the same text, and cannot be changed', () => {
    const text = JSON.stringify(['documents.*', 'billing.read']);
    const [one, other] = [row(text), row(text)];
    expect(permissionsOf(one)).toEqual(['documents.*', 'billing.read']);
    expect(permissionsOf(other)).toBe(permissionsOf(one) as readonly string[]);
    expect(heldPermissionsOf(other)).toBe(heldPermissionsOf(one));
    expect(Object.isFrozen(permissionsOf(one))).toBe(true);
    expect(holds(heldPermissionsOf(one), 'documents.comments.write')).toBe(true);
    expect(holds(heldPermissionsOf(one), 'billing.write')).toBe(false);
  });

  it('holds nothing when none is stored', () => {
    expect(permissionsOf(row(null))).toBeUndefined();
    expect(holds(heldPermissionsOf(row(null)), 'documents.read')).toBe(false);
  });
});
