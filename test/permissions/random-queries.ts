// Random permission queries, for the property tests and scripts/experiments/permission-query-fuzz.ts:
// loose token streams (names, keywords in any case, parentheses, garbage, whitespace), well-formed
// queries printed from random trees, and those with one token spoiled; and a reference that judges
// and evaluates a query as plainly as possible, by translating it into a JavaScript expression.
import fc from 'fast-check';

export const ASKED_NAMES = [
  'a',
  'b',
  'c',
  'documents',
  'documents.read',
  'documents.comments.write',
  'documentsx.read',
  'billing:write',
  'repo/x-y',
  'A_b.C-d',
  'doc.',
] as const;

/** What a random holder holds: names, wildcards at several depths, and `*`. */
export const HELD_POOL = [
  ...ASKED_NAMES,
  'documents.*',
  'documents.comments.*',
  'a.*',
  'repo/x-y.*',
  'Documents.*',
  '*',
] as const;

export const heldList = fc.subarray([...HELD_POOL], { maxLength: 6 });

const name = fc.constantFrom(...ASKED_NAMES);
const keyword = fc.mixedCase(fc.constantFrom('and', 'or'));
const garbage = fc.constantFrom(
  '*',
  'documents.*',
  '.*',
  '#',
  '&&',
  '||',
  '!',
  '"',
  '☃',
  '😀',
  '\u0000',
  '\u00a0',
  '\f',
  'é',
  'x'.repeat(129),
  'y'.repeat(128),
);
const separator = fc.constantFrom('', ' ', ' ', ' ', '  ', '\t', '\n', '\r\n');

/** Tokens joined by random whitespace (or none, which may glue two words into one). */
const joined = (tokens: fc.Arbitrary<string[]>) =>
  tokens.chain((list) =>
    fc
      .array(separator, { minLength: list.length + 1, maxLength: list.length + 1 })
      .map((gaps) => gaps.map((gap, i) => gap + (list[i] ?? '')).join('')),
  );

const looseTokens = fc.array(
  fc.oneof(
    { arbitrary: name, weight: 4 },
    { arbitrary: keyword, weight: 3 },
    { arbitrary: fc.constantFrom('(', ')'), weight: 2 },
    { arbitrary: garbage, weight: 1 },
  ),
  { maxLength: 30 },
);

const { tree } = fc.letrec<{ tree: string[] }>((tie) => ({
  tree: fc.oneof(
    { depthSize: 'small', maxDepth: 8 },
    { arbitrary: name.map((n) => [n]), weight: 3 },
    {
      arbitrary: fc
        .tuple(tie('tree'), keyword, tie('tree'))
        .map(([left, op, right]) => [...left, op, ...right]),
      weight: 2,
    },
    { arbitrary: tie('tree').map((inner) => ['(', ...inner, ')']), weight: 1 },
  ),
}));

/** A well-formed query with one token removed, doubled or replaced. */
const spoiled = fc
  .tuple(tree, fc.nat(), fc.constantFrom('remove', 'double', 'replace'), fc.oneof(name, keyword, garbage))
  .map(([tokens, index, how, other]) => {
    const at = index % tokens.length;
    const copy = [...tokens];
    if (how === 'remove') copy.splice(at, 1);
    else if (how === 'double') copy.splice(at, 0, copy[at] ?? '');
    else copy[at] = other;
    return copy;
  });

export const randomQuery = fc.oneof(joined(looseTokens), joined(tree), joined(spoiled));

/** Whether `held` (a list as stored) covers the asked `permission`, written straight from docs/permissions.md. */
export function referenceHolds(held: readonly string[], permission: string): boolean {
  return held.some(
    (entry) =>
      entry === '*' ||
      entry === permission ||
      (entry.endsWith('.*') && permission.startsWith(entry.slice(0, -1))),
  );
}

/** Whether `held` may grant `granted`, written straight from docs/permissions.md. */
export function referenceGrants(held: readonly string[], granted: string): boolean {
  if (granted === '*') return held.includes('*');
  if (!granted.endsWith('.*')) return referenceHolds(held, granted);
  const below = granted.slice(0, -1);
  return held.some(
    (entry) => entry === '*' || (entry.endsWith('.*') && below.startsWith(entry.slice(0, -1))),
  );
}

type ReferenceQuery = { names: string[]; satisfiedBy(held: readonly string[]): boolean };

const startsOperand = (piece: string) => piece.startsWith('h(') || piece === '(';
const endsOperand = (piece: string) => piece.startsWith('h(') || piece === ')';

/**
 * The query as a JavaScript expression (`h("a") || h("b") && h("c")`: JavaScript's && also binds
 * tighter), or undefined when the grammar refuses it. JavaScript's own parser judges the structure, after a
 * check it would not make: an operand right after an operand (`(a)(b)` would be a call).
 */
export function referenceQuery(text: string): ReferenceQuery | undefined {
  if (text.length < 1 || text.length > 1000) return undefined;
  const tokens = text.match(/[()]|[^ \t\r\n()]+/g) ?? [];
  const names = tokens.filter((token) => !/^(and|or|\(|\))$/i.test(token));
  if (names.length === 0 || names.length > 100) return undefined;
  if (!names.every((token) => /^[A-Za-z0-9._:/-]{1,128}$/.test(token))) return undefined;
  const pieces = tokens.map((token) =>
    /^and$/i.test(token)
      ? '&&'
      : /^or$/i.test(token)
        ? '||'
        : '()'.includes(token)
          ? token
          : `h(${JSON.stringify(token)})`,
  );
  for (let i = 1; i < pieces.length; i++) {
    if (endsOperand(pieces[i - 1] as string) && startsOperand(pieces[i] as string)) return undefined;
  }
  let evaluate: (h: (permission: string) => boolean) => boolean;
  try {
    evaluate = new Function('h', `return ${pieces.join(' ')};`) as typeof evaluate;
  } catch {
    return undefined;
  }
  return {
    names: [...new Set(names)],
    satisfiedBy: (held) => evaluate((permission) => referenceHolds(held, permission)),
  };
}
