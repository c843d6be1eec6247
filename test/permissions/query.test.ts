// The permissions query: its grammar (AND before OR, parentheses, keywords in any case), its
// bounds, one sentence saying where for every malformed form, and the cache of parsed queries.
import { describe, expect, it } from 'bun:test';
import { heldPermissions } from '../../src/permissions/held';
import {
  PERMISSION_QUERY_CACHE_SIZE,
  PermissionQueryError,
  parsePermissionQuery,
} from '../../src/permissions/query';

const satisfied = (query: string, held: readonly string[]) =>
  parsePermissionQuery(query).satisfiedBy(heldPermissions(held));

function refusal(query: string): string {
  try {
    parsePermissionQuery(query);
  } catch (error) {
    expect(error).toBeInstanceOf(PermissionQueryError);
    expect((error as Error).name).toBe('PermissionQueryError');
    return (error as Error).message;
  }
  throw new Error(`${JSON.stringify(query)} was not refused`);
}

/** `count` names joined by AND: `n0 AND n1 AND …`. */
const namesJoined = (count: number) => Array.from({ length: count }, (_, i) => `n${i}`).join(' AND ');

describe('the grammar', () => {
  it.each([
    ['a OR b AND c', ['a'], true],
    ['a OR b AND c', ['b'], false],
    ['a OR b AND c', ['b', 'c'], true],
    ['a AND b OR c', ['c'], true],
    ['a AND b OR c', ['a'], false],
    ['(a OR b) AND c', ['a'], false],
    ['(a OR b) AND c', ['b', 'c'], true],
    ['a AND (b OR c)', ['a', 'c'], true],
    ['a AND (b OR c)', ['b', 'c'], false],
    ['((a))', ['a'], true],
    ['a OR b OR c', ['c'], true],
    ['a AND b AND c', ['a', 'b'], false],
    ['(a AND b) OR (c AND (a OR b))', ['c', 'b'], true],
  ])('binds AND tighter than OR, and parentheses group: %s with %j is %p', (query, held, expected) => {
    expect(satisfied(query, held)).toBe(expected);
  });

  it.each(['and', 'AND', 'And', 'aNd'])('reads %s as AND, whatever its case', (keyword) => {
    expect(satisfied(`a ${keyword} b`, ['a'])).toBe(false);
    expect(satisfied(`a ${keyword} b`, ['a', 'b'])).toBe(true);
  });

  it.each(['or', 'OR', 'Or', 'oR'])('reads %s as OR, whatever its case', (keyword) => {
    expect(satisfied(`a ${keyword} b`, ['b'])).toBe(true);
  });

  it.each(['a AND(b)', '(a)AND b', '(a)OR(b)', '(a) and(b)'])(
    'takes a keyword next to a parenthesis: %s',
    (query) => {
      expect(parsePermissionQuery(query).names).toEqual(['a', 'b']);
    },
  );

  it('reads a keyword inside a word as part of the name: aANDb is one permission', () => {
    expect(parsePermissionQuery('aANDb').names).toEqual(['aANDb']);
    expect(satisfied('aANDb', ['aANDb'])).toBe(true);
  });

  it('cannot ask for a permission named and or or, which are always the keywords', () => {
    expect(refusal('and')).toContain('character 1 ("and")');
    expect(refusal('OR')).toContain('character 1 ("OR")');
    expect(refusal('a AND or')).toContain('character 7 ("or")');
  });

  it('takes names with . _ : - / and digits', () => {
    const query = parsePermissionQuery('documents.read AND billing:write OR repo/x-y AND A_b.9');
    expect(query.names).toEqual(['documents.read', 'billing:write', 'repo/x-y', 'A_b.9']);
  });

  it('allows whitespace (spaces, tabs, line breaks) around and between tokens', () => {
    const query = parsePermissionQuery(' \t\r\n a\tAND\n( b\r\nOR c ) \n');
    expect(query.names).toEqual(['a', 'b', 'c']);
    expect(query.satisfiedBy(heldPermissions(['a', 'c']))).toBe(true);
  });

  it('lists each name asked once, in the order it first appears', () => {
    expect(parsePermissionQuery('b AND a OR (b AND c)').names).toEqual(['b', 'a', 'c']);
  });

  it('keeps the text it was parsed from', () => {
    expect(parsePermissionQuery(' a OR b ').text).toBe(' a OR b ');
  });

  it('is satisfied through a held wildcard', () => {
    expect(satisfied('documents.read AND billing:write', ['documents.*', 'billing:write'])).toBe(true);
    expect(satisfied('documents AND billing:write', ['documents.*', 'billing:write'])).toBe(false);
  });

  it('is satisfied by * whatever it asks, and by no permissions never', () => {
    expect(satisfied('a AND (b OR c) AND documents.read', ['*'])).toBe(true);
    expect(satisfied('a OR b', [])).toBe(false);
    expect(parsePermissionQuery('a OR b').satisfiedBy(heldPermissions(null))).toBe(false);
  });

  it('compares names case-sensitively', () => {
    expect(satisfied('Documents.read', ['documents.read'])).toBe(false);
  });
});

describe('the bounds', () => {
  it('takes a query of 1,000 characters and refuses one of 1,001', () => {
    const longest = `a OR${' '.repeat(995)}b`;
    expect(longest).toHaveLength(1000);
    expect(parsePermissionQuery(longest).names).toEqual(['a', 'b']);
    expect(refusal(`${longest} `)).toBe(
      'The permissions query is 1001 characters long; at most 1000 are allowed.',
    );
  });

  it('takes 100 names and refuses the 101st, naming where it is', () => {
    expect(parsePermissionQuery(namesJoined(100)).names).toHaveLength(100);
    const tooMany = namesJoined(101);
    expect(refusal(tooMany)).toBe(
      `The permissions query is not valid at character ${tooMany.indexOf('n100') + 1} ("n100"): ` +
        'a query names at most 100 permissions.',
    );
  });

  it('counts every name asked, repeats included', () => {
    expect(refusal(Array(101).fill('a').join(' OR '))).toContain('at most 100 permissions');
  });

  it('takes a name of 128 characters and refuses one of 129', () => {
    expect(parsePermissionQuery('x'.repeat(128)).names).toEqual(['x'.repeat(128)]);
    expect(refusal(`a OR ${'x'.repeat(129)}`)).toBe(
      `The permissions query is not valid at character 6 ("${'x'.repeat(40)}…"): ` +
        'a permission name is at most 128 characters, and this one is 129.',
    );
  });

  it('takes parentheses nested as deep as 1,000 characters allow', () => {
    const deepest = `${'('.repeat(499)}a${')'.repeat(499)}`;
    expect(satisfied(deepest, ['a'])).toBe(true);
    expect(satisfied(deepest, ['b'])).toBe(false);
  });

  it('parses a query of 1,000 characters in well under a millisecond', () => {
    const times: number[] = [];
    for (let i = 0; i < 200; i++) {
      // Distinct texts, so that none is answered from the cache.
      const query = `${namesJoined(50)} OR (x${i} AND y)`.padEnd(1000, ' ');
      const started = performance.now();
      parsePermissionQuery(query);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    expect(times[100]).toBeLessThan(1);
  });
});

describe('a malformed query', () => {
  it.each([
    ['', 'The permissions query is empty; it must name at least one permission.'],
    [' \t\n ', 'The permissions query is only whitespace; it must name at least one permission.'],
  ])('%j is refused as empty', (query, sentence) => {
    expect(refusal(query)).toBe(sentence);
  });

  it.each([
    // [query, the character named, the text quoted, part of the reason]
    ['AND a', 1, 'AND', 'begins with a permission name or "("'],
    ['  or a', 3, 'or', 'begins with a permission name or "("'],
    ['a AND', 3, 'AND', 'ends after this operator'],
    ['a OR b or ', 8, 'or', 'ends after this operator'],
    ['a AND OR b', 7, 'OR', 'a permission name or "(" was expected after "AND"'],
    ['a or and b', 6, 'and', 'a permission name or "(" was expected after "OR"'],
    ['(AND a)', 2, 'AND', 'a permission name or "(" was expected after "("'],
    ['a b', 3, 'b', '"AND" or "OR" was expected between two permission names'],
    ['(a) b', 5, 'b', '"AND" or "OR" was expected after ")"'],
    ['a (b)', 3, '(', '"AND" or "OR" was expected before "("'],
    ['(a', 1, '(', 'this "(" is never closed'],
    ['a AND (b OR (c)', 7, '(', 'this "(" is never closed'],
    ['a AND (', 7, '(', 'this "(" is never closed'],
    ['a)', 2, ')', 'closes a parenthesis that was never opened'],
    ['(a)) OR b', 4, ')', 'closes a parenthesis that was never opened'],
    [')', 1, ')', 'closes a parenthesis that was never opened'],
    ['()', 2, ')', 'the parentheses are empty'],
    ['a AND ( )', 9, ')', 'the parentheses are empty'],
    ['(a OR )', 7, ')', 'a permission name or "(" was expected after "OR"'],
    ['*', 1, '*', 'a wildcard ("*") belongs only in the permissions a key holds'],
    ['a OR documents.*', 16, 'documents.*', 'a wildcard ("*") belongs only in the permissions a key holds'],
    ['*.read', 1, '*.read', 'a wildcard ("*") belongs only in the permissions a key holds'],
    ['a#b', 2, 'a#b', '"#" may not appear in a permission name, which holds only A–Z a–z 0–9 . _ : - /'],
    ['a && b', 3, '&&', '"&" may not appear in a permission name'],
    ['a OR bé', 7, 'bé', '"é" may not appear in a permission name'],
    ['a OR b☃', 7, 'b☃', '"☃" may not appear in a permission name'],
    ['a\u00a0AND b', 2, 'a\u00a0AND', '"\u00a0" may not appear in a permission name'],
    ['a OR "b"', 6, '"b"', '"\\"" may not appear in a permission name'],
    ['a\u0000', 2, 'a\u0000', '"\\u0000" may not appear in a permission name'],
  ])('%j is refused at character %d (%j): %s', (query, character, shown, reason) => {
    const sentence = refusal(query);
    expect(sentence).toStartWith(
      `The permissions query is not valid at character ${character} (${JSON.stringify(shown)}): `,
    );
    expect(sentence).toContain(reason);
    expect(sentence).toEndWith('.');
  });

  it('quotes at most 40 characters of a long word', () => {
    expect(refusal(`a OR ${'x'.repeat(60)}#`)).toContain(`("${'x'.repeat(40)}…")`);
  });

  it('is refused with its first problem, reading from the left', () => {
    expect(refusal('a b ) *')).toContain('character 3 ("b")');
  });

  it('is refused when it is not a string', () => {
    expect(refusal(42 as unknown as string)).toBe('The permissions query must be a string.');
  });
});

describe('the parsed-query cache', () => {
  it('answers a text seen before with the same compiled query', () => {
    expect(parsePermissionQuery('cache.a OR cache.b')).toBe(parsePermissionQuery('cache.a OR cache.b'));
  });

  it('keeps no refusal: a malformed query is refused again, with the same sentence', () => {
    expect(refusal('cache AND')).toBe(refusal('cache AND'));
  });

  it(`keeps at most ${PERMISSION_QUERY_CACHE_SIZE} queries, dropping the oldest first`, () => {
    const first = parsePermissionQuery('evicted.first');
    for (let i = 0; i < PERMISSION_QUERY_CACHE_SIZE; i++) parsePermissionQuery(`filler.${i}`);
    const again = parsePermissionQuery('evicted.first');
    expect(again).not.toBe(first);
    expect(again.names).toEqual(first.names);
    expect(parsePermissionQuery(`filler.${PERMISSION_QUERY_CACHE_SIZE - 1}`)).toBe(
      parsePermissionQuery(`filler.${PERMISSION_QUERY_CACHE_SIZE - 1}`),
    );
  });
});
