// Forward-auth's rules for routes: a bad rules file names the rule, the path is normalised as an
// upstream sees it (or refused), the first matching rule applies, and the proxy's own headers say
// which request is asked about.
import { describe, expect, it } from 'bun:test';
import fc from 'fast-check';
import {
  forwardedRequestOf,
  matchingRule,
  normalisedPath,
  PathRefusedError,
  parseRouteRules,
  type RouteRule,
  RouteRulesError,
} from '../../src/verification/route-rules';

// A stand-in for the permissions grammar: the rules only pass the query on and its errors back.
function parsePermissions(query: string): string {
  if (query.includes('*')) throw new Error('A * is not allowed in a permissions query.');
  return query;
}

const rulesOf = (rules: unknown[]) => parseRouteRules(JSON.stringify(rules), parsePermissions);

describe('parseRouteRules reads', () => {
  it('an empty array as no rules', () => {
    expect(parseRouteRules('[]', parsePermissions)).toEqual([]);
    expect(parseRouteRules(' [ ]\n', parsePermissions)).toEqual([]);
  });

  it('every property, counting rules from 1', () => {
    const rules = rulesOf([
      { path: '/documents/*', methods: ['GET', 'head'], permissions: 'documents.read', minLevel: 2 },
      { path: '/health', allow: 'anyone' },
      { path: '*', allow: 'credential' },
      { path: '/*' },
    ]);
    expect(rules).toEqual([
      {
        index: 1,
        path: { kind: 'prefix', value: '/documents' },
        methods: new Set(['GET', 'HEAD']),
        permissions: 'documents.read',
        minLevel: 2,
        allow: 'credential',
      },
      { index: 2, path: { kind: 'exact', value: '/health' }, allow: 'anyone' },
      { index: 3, path: { kind: 'any' }, allow: 'credential' },
      { index: 4, path: { kind: 'prefix', value: '' }, allow: 'credential' },
    ]);
  });

  it('minLevel 0 and 8, and a methods list with a repeated method', () => {
    const [low, high] = rulesOf([
      { path: '/a', minLevel: 0, methods: ['GET', 'get'] },
      { path: '/b', minLevel: 8 },
    ]);
    expect(low?.minLevel).toBe(0);
    expect(low?.methods).toEqual(new Set(['GET']));
    expect(high?.minLevel).toBe(8);
  });
});

describe('parseRouteRules refuses', () => {
  it.each([
    ['{', /^the file is not JSON: /],
    ['', /^the file is not JSON: /],
    ['{"path":"/a"}', /^the file must be a JSON array of rules/],
    ['null', /^the file must be a JSON array of rules/],
  ])('%p', (text, message) => {
    expect(() => parseRouteRules(text, parsePermissions)).toThrow(message);
  });

  it.each([
    [[{ path: '/ok' }, null], 'rule 2 (null): must be an object with a path.'],
    [[{ path: '/ok' }, '/a'], 'rule 2 ("/a"): must be an object with a path.'],
    [[[{ path: '/a' }]], 'rule 1 ([{"path":"/a"}]): must be an object with a path.'],
    [
      [{ path: '/a', role: 'x' }],
      'rule 1 ({"path":"/a","role":"x"}): "role" is not a property of a rule (those are methods, path, permissions, minLevel, allow).',
    ],
    [
      [{ methods: ['GET'] }],
      'rule 1 ({"methods":["GET"]}): path must be a string: an exact path, a prefix ending in /*, or *.',
    ],
    [
      [{ path: 7 }],
      'rule 1 ({"path":7}): path must be a string: an exact path, a prefix ending in /*, or *.',
    ],
    [[{ path: '' }], 'rule 1 ({"path":""}): path must start with / (or be * for every path).'],
    [
      [{ path: 'documents/*' }],
      'rule 1 ({"path":"documents/*"}): path must start with / (or be * for every path).',
    ],
    [
      [{ path: '/docs*' }],
      'rule 1 ({"path":"/docs*"}): path may hold * only as the whole path or at the end of a prefix /*.',
    ],
    [
      [{ path: '/a/*/b' }],
      'rule 1 ({"path":"/a/*/b"}): path may hold * only as the whole path or at the end of a prefix /*.',
    ],
    [
      [{ path: '/**' }],
      'rule 1 ({"path":"/**"}): path may hold * only as the whole path or at the end of a prefix /*.',
    ],
    [
      [{ path: '/public/../admin' }],
      'rule 1 ({"path":"/public/../admin"}): path is not written as requests are matched: write "/admin".',
    ],
    [
      [{ path: '/%7Euser/*' }],
      'rule 1 ({"path":"/%7Euser/*"}): path is not written as requests are matched: write "/~user/*".',
    ],
    [
      [{ path: '/docs//*' }],
      'rule 1 ({"path":"/docs//*"}): path is not written as requests are matched: write "/docs/*".',
    ],
    [
      [{ path: '/docs?x=1' }],
      'rule 1 ({"path":"/docs?x=1"}): path is not written as requests are matched: write "/docs".',
    ],
    [
      [{ path: '/caf%c3%a9' }],
      'rule 1 ({"path":"/caf%c3%a9"}): path is not written as requests are matched: write "/caf%C3%A9".',
    ],
    [[{ path: '/../x' }], 'rule 1 ({"path":"/../x"}): path climbs above the root (..).'],
    [[{ path: '/a%2Fb' }], 'rule 1 ({"path":"/a%2Fb"}): path holds an encoded slash (%2F).'],
    [[{ path: '/a\\b' }], 'rule 1 ({"path":"/a\\\\b"}): path holds a backslash.'],
    [
      [{ path: '/a', methods: [] }],
      'rule 1 ({"path":"/a","methods":[]}): methods must be a non-empty array of HTTP methods.',
    ],
    [
      [{ path: '/a', methods: 'GET' }],
      'rule 1 ({"path":"/a","methods":"GET"}): methods must be a non-empty array of HTTP methods.',
    ],
    [
      [{ path: '/a', methods: ['GET', 'NOT A METHOD'] }],
      'rule 1 ({"path":"/a","methods":["GET","NOT A METHOD"]}): methods holds "NOT A METHOD", which is not an HTTP method.',
    ],
    [
      [{ path: '/a', methods: ['GET', 1] }],
      'rule 1 ({"path":"/a","methods":["GET",1]}): methods holds 1, which is not an HTTP method.',
    ],
    [
      [{ path: '/a', minLevel: 9 }],
      'rule 1 ({"path":"/a","minLevel":9}): minLevel must be an integer from 0 to 8.',
    ],
    [
      [{ path: '/a', minLevel: -1 }],
      'rule 1 ({"path":"/a","minLevel":-1}): minLevel must be an integer from 0 to 8.',
    ],
    [
      [{ path: '/a', minLevel: 1.5 }],
      'rule 1 ({"path":"/a","minLevel":1.5}): minLevel must be an integer from 0 to 8.',
    ],
    [
      [{ path: '/a', minLevel: '3' }],
      'rule 1 ({"path":"/a","minLevel":"3"}): minLevel must be an integer from 0 to 8.',
    ],
    [
      [{ path: '/a', minLevel: null }],
      'rule 1 ({"path":"/a","minLevel":null}): minLevel must be an integer from 0 to 8.',
    ],
    [
      [{ path: '/a', permissions: ['a'] }],
      'rule 1 ({"path":"/a","permissions":["a"]}): permissions must be a string (a permissions query).',
    ],
    [
      [{ path: '/a', permissions: 'docs.*' }],
      'rule 1 ({"path":"/a","permissions":"docs.*"}): permissions: A * is not allowed in a permissions query.',
    ],
    [
      [{ path: '/a', allow: 'everyone' }],
      'rule 1 ({"path":"/a","allow":"everyone"}): allow must be "credential" or "anyone".',
    ],
    [
      [{ path: '/a', allow: null }],
      'rule 1 ({"path":"/a","allow":null}): allow must be "credential" or "anyone".',
    ],
    [
      [{ path: '/a', allow: 'anyone', minLevel: 1 }],
      'rule 1 ({"path":"/a","allow":"anyone","minLevel":1}): a rule that allows anyone checks no credential, so it cannot also ask for permissions or a minLevel.',
    ],
    [
      [{ path: '/a', allow: 'anyone', permissions: 'a' }],
      'rule 1 ({"path":"/a","allow":"anyone","permissions":"a"}): a rule that allows anyone checks no credential, so it cannot also ask for permissions or a minLevel.',
    ],
    [
      [
        { path: '/ok' },
        { path: '/ok' },
        { path: '/docs/*', permissions: 'documents.read OR documents.write', minLevel: 12 },
      ],
      'rule 3 ({"path":"/docs/*","permissions":"documents.read OR documents...): minLevel must be an integer from 0 to 8.',
    ],
  ])('%p: %p', (rules, message) => {
    expect(() => rulesOf(rules as unknown[])).toThrow(new RouteRulesError(message));
  });

  it('throws only RouteRulesError for a bad file', () => {
    expect(() => rulesOf([{ path: '/../x' }])).toThrow(RouteRulesError);
  });
});

describe('matchingRule', () => {
  const rules = rulesOf([
    { path: '/health', allow: 'anyone' },
    { path: '/documents/*', methods: ['GET', 'HEAD'], permissions: 'documents.read' },
    { path: '/documents/*', methods: ['PUT', 'DELETE'], permissions: 'documents.write' },
    { path: '/admin/*', minLevel: 8 },
    { path: '/public/*', allow: 'anyone' },
  ]);
  const indexOf = (method: string, target: string, within: readonly RouteRule<string>[] = rules) =>
    matchingRule(within, method, normalisedPath(target))?.index;

  it.each([
    ['GET', '/health', 1],
    ['POST', '/health', 1],
    ['GET', '/health/', undefined],
    ['GET', '/healthz', undefined],
    ['GET', '/documents', 2],
    ['GET', '/documents/', 2],
    ['GET', '/documents/a/b', 2],
    ['HEAD', '/documents/a', 2],
    ['GET', '/documentsx', undefined],
    ['GET', '/documentsx/a', undefined],
    ['PUT', '/documents/a', 3],
    ['DELETE', '/documents/a', 3],
    ['delete', '/documents/a', 3],
    ['Get', '/documents/a', 2],
    ['POST', '/documents/a', undefined],
    ['GET', '/admin/users', 4],
    ['GET', '/public/logo.png', 5],
    ['GET', '/', undefined],
    // The query string is not part of the path.
    ['GET', '/health?x=/admin/y', 1],
    ['GET', '/documents?path=/public/x', 2],
    ['GET', '/admin?public', 4],
    ['GET', '/public?/admin/x', 5],
    // The path is matched as the upstream will see it.
    ['GET', '/public/../admin/x', 4],
    ['GET', '/public/%2e%2e/admin/x', 4],
    ['GET', '/public/.%2E/admin/x', 4],
    ['GET', '/%61dmin/x', 4],
    ['GET', '//admin//x', 4],
    ['GET', '/public/./x', 5],
  ])('%p %p → rule %p', (method, target, index) => {
    expect(indexOf(method, target)).toBe(index as number | undefined);
  });

  it('takes the first rule that matches', () => {
    const overlapping = rulesOf([{ path: '/a/b' }, { path: '/a/*', allow: 'anyone' }, { path: '*' }]);
    expect(indexOf('GET', '/a/b', overlapping)).toBe(1);
    expect(indexOf('GET', '/a/c', overlapping)).toBe(2);
    expect(indexOf('GET', '/b', overlapping)).toBe(3);
  });

  it('`*` and `/*` match every path', () => {
    for (const path of ['*', '/*']) {
      const all = rulesOf([{ path }]);
      for (const target of ['/', '/a', '/a/b/', '/%7B']) expect(indexOf('PATCH', target, all)).toBe(1);
    }
  });

  it('no rules match nothing', () => {
    expect(matchingRule([], 'GET', '/')).toBeUndefined();
  });
});

describe('normalisedPath', () => {
  it.each([
    ['/', '/'],
    ['/a/b', '/a/b'],
    ['/a/b/', '/a/b/'],
    ['//a///b', '/a/b'],
    ['//', '/'],
    ['/a//', '/a/'],
    ['/a/./b', '/a/b'],
    ['/a/.', '/a/'],
    ['/.', '/'],
    ['/a/b/..', '/a/'],
    ['/a/..', '/'],
    ['/a/b/../c', '/a/c'],
    ['/public/../admin/x', '/admin/x'],
    ['/public/%2e%2e/admin/x', '/admin/x'],
    ['/public/%2E%2E/admin/x', '/admin/x'],
    ['/public/.%2e/admin/x', '/admin/x'],
    ['/a/%2e/b', '/a/b'],
    ['/a/...', '/a/...'],
    ['/a/..b', '/a/..b'],
    ['/a/.b', '/a/.b'],
    ['/%7E', '/~'],
    ['/%7e', '/~'],
    ['/%41', '/A'],
    ['/%61%62%63-%5F%2D%2E%30', '/abc-_-.0'],
    ['/caf%c3%a9', '/caf%C3%A9'],
    ['/a%20b', '/a%20b'],
    ['/%25', '/%25'],
    ['/%252e%252e/x', '/%252e%252e/x'],
    ['/%3f', '/%3F'],
    ['/a;b=c/d', '/a;b=c/d'],
    ["/!$&'()*+,;=:@-._~", "/!$&'()*+,;=:@-._~"],
    ['/a{b}', '/a%7Bb%7D'],
    ['/a"<>[]^`|', '/a%22%3C%3E%5B%5D%5E%60%7C'],
    ['/a?b', '/a'],
    ['/a?b/../..', '/a'],
    ['/a#b', '/a'],
    ['/a#b?c', '/a'],
    ['/a?%zz', '/a'],
    ['/a?\\', '/a'],
    ['/?', '/'],
  ])('%p → %p', (raw, normal) => {
    expect(normalisedPath(raw)).toBe(normal);
  });

  it.each([
    ['', 'The path must start with /.'],
    ['a/b', 'The path must start with /.'],
    ['?/a', 'The path must start with /.'],
    ['http://example.com/a', 'The path must start with /.'],
    ['*', 'The path must start with /.'],
    ['/..', 'The path climbs above the root (..).'],
    ['/../x', 'The path climbs above the root (..).'],
    ['/a/../../x', 'The path climbs above the root (..).'],
    ['/a/./../..', 'The path climbs above the root (..).'],
    ['/%2e%2e/x', 'The path climbs above the root (..).'],
    ['/a/%2E%2E/%2e%2e', 'The path climbs above the root (..).'],
    ['/a%2Fb', 'The path holds an encoded slash (%2F).'],
    ['/a%2fb', 'The path holds an encoded slash (%2F).'],
    ['/a%5Cb', 'The path holds an encoded backslash (%5C).'],
    ['/a%5cb', 'The path holds an encoded backslash (%5C).'],
    ['/a\\b', 'The path holds a backslash.'],
    ['/a\\..\\..\\b', 'The path holds a backslash.'],
    ['/a\0b', 'The path holds a NUL.'],
    ['/a%00b', 'The path holds an encoded NUL (%00).'],
    ['/a%', 'The path holds a % that does not start an escape %XX.'],
    ['/a%4', 'The path holds a % that does not start an escape %XX.'],
    ['/a%zz', 'The path holds a % that does not start an escape %XX.'],
    ['/a%u002e', 'The path holds a % that does not start an escape %XX.'],
    ['/a%%41', 'The path holds a % that does not start an escape %XX.'],
    ['/a b', 'The path holds a control character, a space or a non-ASCII character; escape it as %XX.'],
    ['/a\tb', 'The path holds a control character, a space or a non-ASCII character; escape it as %XX.'],
    ['/a\nb', 'The path holds a control character, a space or a non-ASCII character; escape it as %XX.'],
    ['/a\x7fb', 'The path holds a control character, a space or a non-ASCII character; escape it as %XX.'],
    ['/café', 'The path holds a control character, a space or a non-ASCII character; escape it as %XX.'],
    ['/public/..;/admin', 'The path holds a dot segment with parameters (such as ..;).'],
    ['/public/.;x/admin', 'The path holds a dot segment with parameters (such as ..;).'],
    ['/public/%2e%2e;/admin', 'The path holds a dot segment with parameters (such as ..;).'],
  ])('refuses %p', (raw, message) => {
    expect(() => normalisedPath(raw)).toThrow(new PathRefusedError(message));
  });

  // Paths built from the pieces that matter: dots, slashes, escapes (good and bad), odd characters.
  const pathPieces = fc.constantFrom(
    '/',
    '//',
    '.',
    '..',
    '%2e',
    '%2E',
    '%2f',
    '%5c',
    '%00',
    '%41',
    '%7e',
    '%c3',
    '%zz',
    '%',
    'a',
    'b',
    ';',
    '?',
    '#',
    '\\',
    ' ',
    '{',
    'é',
    '\0',
  );
  const paths = fc.oneof(
    fc.array(pathPieces, { maxLength: 12 }).map((pieces) => `/${pieces.join('')}`),
    fc.string({ maxLength: 30 }).map((text) => `/${text}`),
    fc.string({ maxLength: 30 }),
  );

  it('gives a normalised path back unchanged, and throws nothing but PathRefusedError (fast-check)', () => {
    fc.assert(
      fc.property(paths, (raw) => {
        let normal: string;
        try {
          normal = normalisedPath(raw);
        } catch (error) {
          expect(error).toBeInstanceOf(PathRefusedError);
          return;
        }
        expect(normalisedPath(normal)).toBe(normal);
        expect(normal).toStartWith('/');
        expect(normal).not.toMatch(/\/\/|\/\.\.?(\/|$)|[?#\\]/);
      }),
      { seed: 20261128, numRuns: 2000 },
    );
  });
});

describe('forwardedRequestOf', () => {
  const headersOf = (init: Record<string, string>) => new Headers(init);

  it.each([
    [
      { 'x-forwarded-method': 'POST', 'x-forwarded-uri': '/documents/a?x=1' },
      'GET',
      undefined,
      ['POST', '/documents/a?x=1'],
    ],
    [
      { 'x-original-method': 'DELETE', 'x-original-uri': '/documents/a' },
      'GET',
      undefined,
      ['DELETE', '/documents/a'],
    ],
    // Both pairs agreeing.
    [
      {
        'x-forwarded-method': 'PUT',
        'x-forwarded-uri': '/a',
        'x-original-method': 'put',
        'x-original-uri': '/a',
      },
      'GET',
      '/b',
      ['PUT', '/a'],
    ],
    // The headers win over the suffix.
    [{ 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/a' }, 'POST', '/b', ['GET', '/a']],
    // Envoy: the suffix with the request's own method.
    [{}, 'PATCH', '/documents/a?x=1', ['PATCH', '/documents/a?x=1']],
    [{}, 'GET', '/', ['GET', '/']],
    [{}, 'GET', undefined, undefined],
    [{}, 'GET', '', undefined],
  ])('%p, %p, suffix %p → %p', (headers, method, suffix, expected) => {
    const request = forwardedRequestOf(headersOf(headers), method, suffix);
    expect(request).toEqual(expected && { method: expected[0] as string, target: expected[1] as string });
  });

  it.each([
    [{ 'x-forwarded-uri': '/a' }, 'x-forwarded-method and x-forwarded-uri must come together.'],
    [{ 'x-forwarded-method': 'GET' }, 'x-forwarded-method and x-forwarded-uri must come together.'],
    [{ 'x-original-uri': '/a' }, 'x-original-method and x-original-uri must come together.'],
    [
      {
        'x-forwarded-method': 'GET',
        'x-forwarded-uri': '/public/a',
        'x-original-method': 'GET',
        'x-original-uri': '/admin',
      },
      'X-Forwarded-Method/Uri and X-Original-Method/URI name different requests.',
    ],
    [
      {
        'x-forwarded-method': 'GET',
        'x-forwarded-uri': '/a',
        'x-original-method': 'DELETE',
        'x-original-uri': '/a',
      },
      'X-Forwarded-Method/Uri and X-Original-Method/URI name different requests.',
    ],
  ])('refuses %p', (headers, message) => {
    expect(() => forwardedRequestOf(headersOf(headers), 'GET', '/x')).toThrow(new PathRefusedError(message));
  });
});
