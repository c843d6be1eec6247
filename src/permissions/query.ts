// The permissions query of verify and forward-auth : permission names joined by AND and OR,
// with parentheses, AND binding tighter than OR. Parsed in one pass without recursion, once per
// distinct text (a bounded cache), into a small tree that every verify carrying the query evaluates
// without allocating.
import { type AskedPermission, askedPermission, type HeldPermissions, holdsAsked } from './held';
import { firstNonNameCharacter, MAX_PERMISSION_LENGTH, NAME_CHARACTERS, quoted } from './names';

export const MAX_QUERY_LENGTH = 1000;
export const MAX_QUERY_NAMES = 100;
/** Distinct query texts kept parsed; the oldest is dropped first. */
export const PERMISSION_QUERY_CACHE_SIZE = 1000;

/** A query that is not valid; its message is the one sentence saying where. The route answers 400. */
export class PermissionQueryError extends Error {
  override name = 'PermissionQueryError';
}

export type PermissionQuery = {
  readonly text: string;
  /** The distinct names asked for, in the order they first appear. */
  readonly names: readonly string[];
  satisfiedBy(held: HeldPermissions): boolean;
};

/** A name, or several conditions of which every one (AND) or some one (OR) must hold. */
type Condition = AskedPermission | Junction;
type Junction = { readonly every: boolean; readonly parts: readonly Condition[] };

type Token = { kind: 'name' | 'and' | 'or' | 'open' | 'close'; text: string; at: number };

/** What one pair of parentheses (or the whole query) has read so far: `a AND b OR c AND …`. */
type Group = { opener: Token | undefined; alternatives: Condition[]; conjunction: Condition[] };

const SPACE = 32;
const TAB = 9;
const LINE_FEED = 10;
const CARRIAGE_RETURN = 13;
const OPEN = 40;
const CLOSE = 41;

const isWhitespace = (code: number) =>
  code === SPACE || code === TAB || code === LINE_FEED || code === CARRIAGE_RETURN;

// The keywords are case-insensitive, as in Unkey's grammar, so a permission named `and` or `or` (in
// any case) cannot be asked for: the word is always read as the operator. ASCII-only on purpose.
const AND_KEYWORD = /^and$/i;
const OR_KEYWORD = /^or$/i;

function notValidAt(at: number, shown: string, why: string) {
  return new PermissionQueryError(
    `The permissions query is not valid at character ${at + 1} (${quoted(shown)}): ${why}.`,
  );
}

/** The token that starts at `at` (not whitespace); a word's characters are checked here. */
function tokenAt(text: string, at: number): Token {
  const code = text.charCodeAt(at);
  if (code === OPEN) return { kind: 'open', text: '(', at };
  if (code === CLOSE) return { kind: 'close', text: ')', at };
  let end = at + 1;
  for (; end < text.length; end++) {
    const next = text.charCodeAt(end);
    if (isWhitespace(next) || next === OPEN || next === CLOSE) break;
  }
  const word = text.slice(at, end);
  if (AND_KEYWORD.test(word)) return { kind: 'and', text: word, at };
  if (OR_KEYWORD.test(word)) return { kind: 'or', text: word, at };
  const star = word.indexOf('*');
  if (star !== -1) {
    throw notValidAt(
      at + star,
      word,
      'a wildcard ("*") belongs only in the permissions a key holds; a query names each permission it asks for',
    );
  }
  const bad = firstNonNameCharacter(word);
  if (bad !== -1) {
    const character = String.fromCodePoint(word.codePointAt(bad) ?? 0);
    throw notValidAt(
      at + bad,
      word,
      `${JSON.stringify(character)} may not appear in a permission name, which holds only ${NAME_CHARACTERS}`,
    );
  }
  if (word.length > MAX_PERMISSION_LENGTH) {
    throw notValidAt(
      at,
      word,
      `a permission name is at most ${MAX_PERMISSION_LENGTH} characters, and this one is ${word.length}`,
    );
  }
  return { kind: 'name', text: word, at };
}

/** `every` (AND) or `some` (OR) of `parts`, flattened: `(a AND b) AND c` is one AND of three. */
function junction(every: boolean, parts: readonly Condition[]): Condition {
  const flat: Condition[] = [];
  for (const part of parts) {
    if ('parts' in part && part.every === every) flat.push(...part.parts);
    else flat.push(part);
  }
  return flat.length === 1 ? (flat[0] as Condition) : { every, parts: flat };
}

const groupCondition = (group: Group) =>
  junction(false, [...group.alternatives, junction(true, group.conjunction)]);

type Check = (held: HeldPermissions) => boolean;

/**
 * The condition as nested closures. Recursion is bounded here: after flattening, every junction
 * has at least two parts and every leaf is one of at most 100 names, so the tree is under 100 deep.
 */
function checkOf(condition: Condition): Check {
  if (!('parts' in condition)) return (held) => holdsAsked(held, condition);
  const parts = condition.parts.map(checkOf);
  if (condition.every) {
    return (held) => {
      for (let i = 0; i < parts.length; i++) if (!(parts[i] as Check)(held)) return false;
      return true;
    };
  }
  return (held) => {
    for (let i = 0; i < parts.length; i++) if ((parts[i] as Check)(held)) return true;
    return false;
  };
}

/** The refusal of `token` where a permission name or "(" was due, naming what came before it. */
function operandExpected(previous: Token | undefined, token: Token): PermissionQueryError {
  if (previous === undefined) {
    return notValidAt(
      token.at,
      token.text,
      'a query begins with a permission name or "(", not with an operator',
    );
  }
  if (previous.kind === 'open') {
    return notValidAt(token.at, token.text, 'a permission name or "(" was expected after "("');
  }
  return notValidAt(
    token.at,
    token.text,
    `a permission name or "(" was expected after ${quoted(previous.text.toUpperCase())}`,
  );
}

function parse(text: string): PermissionQuery {
  if (text.length > MAX_QUERY_LENGTH) {
    throw new PermissionQueryError(
      `The permissions query is ${text.length} characters long; at most ${MAX_QUERY_LENGTH} are allowed.`,
    );
  }
  const asked = new Map<string, AskedPermission>();
  let namesRead = 0;
  const groups: Group[] = [{ opener: undefined, alternatives: [], conjunction: [] }];
  let group = groups[0] as Group;
  let operandNext = true;
  let previous: Token | undefined;
  for (let at = 0; ; ) {
    while (at < text.length && isWhitespace(text.charCodeAt(at))) at++;
    if (at === text.length) break;
    const token = tokenAt(text, at);
    at += token.text.length;
    switch (token.kind) {
      case 'name': {
        if (!operandNext) {
          throw notValidAt(
            token.at,
            token.text,
            previous?.kind === 'close'
              ? '"AND" or "OR" was expected after ")"'
              : '"AND" or "OR" was expected between two permission names',
          );
        }
        if (++namesRead > MAX_QUERY_NAMES) {
          throw notValidAt(token.at, token.text, `a query names at most ${MAX_QUERY_NAMES} permissions`);
        }
        let permission = asked.get(token.text);
        if (permission === undefined) {
          permission = askedPermission(token.text);
          asked.set(token.text, permission);
        }
        group.conjunction.push(permission);
        operandNext = false;
        break;
      }
      case 'and':
      case 'or':
        if (operandNext) throw operandExpected(previous, token);
        if (token.kind === 'or') {
          group.alternatives.push(junction(true, group.conjunction));
          group.conjunction = [];
        }
        operandNext = true;
        break;
      case 'open':
        if (!operandNext) throw notValidAt(token.at, '(', '"AND" or "OR" was expected before "("');
        group = { opener: token, alternatives: [], conjunction: [] };
        groups.push(group);
        break;
      case 'close': {
        if (operandNext && previous?.kind === 'open') {
          throw notValidAt(
            token.at,
            ')',
            'the parentheses are empty; a permission name was expected in them',
          );
        }
        if (operandNext && previous !== undefined) throw operandExpected(previous, token);
        if (groups.length === 1) {
          throw notValidAt(token.at, ')', 'this ")" closes a parenthesis that was never opened');
        }
        const closed = groupCondition(groups.pop() as Group);
        group = groups[groups.length - 1] as Group;
        group.conjunction.push(closed);
        break;
      }
    }
    previous = token;
  }
  if (previous === undefined) {
    throw new PermissionQueryError(
      `The permissions query is ${text.length === 0 ? 'empty' : 'only whitespace'}; it must name at least one permission.`,
    );
  }
  if (operandNext && (previous.kind === 'and' || previous.kind === 'or')) {
    throw notValidAt(
      previous.at,
      previous.text,
      'the query ends after this operator; a permission name or "(" was expected after it',
    );
  }
  if (groups.length > 1) {
    throw notValidAt(
      (group.opener as Token).at,
      '(',
      'this "(" is never closed; a ")" was expected to match it',
    );
  }
  const check = checkOf(groupCondition(group));
  // Not frozen: its readonly type guards it, and freezing is not free.
  return {
    text,
    names: [...asked.keys()],
    // A query is only names joined by AND and OR, so `*` satisfies every query and holding nothing
    // satisfies none: both answer without walking the tree.
    satisfiedBy: (held: HeldPermissions) =>
      held.all || ((held.exact.size > 0 || held.prefixes.size > 0) && check(held)),
  };
}

const parsed = new Map<string, PermissionQuery>();

/**
 * The query `text` compiled, the same object for a text seen lately; a query that is not valid throws
 * a PermissionQueryError saying where. Refusals are not kept: parsing one costs no more than its
 * length, and keeping them would let garbage push the queries in use out of the cache.
 */
export function parsePermissionQuery(text: string): PermissionQuery {
  const known = parsed.get(text);
  if (known !== undefined) return known;
  if (typeof text !== 'string') throw new PermissionQueryError('The permissions query must be a string.');
  const query = parse(text);
  if (parsed.size >= PERMISSION_QUERY_CACHE_SIZE) parsed.delete(parsed.keys().next().value as string);
  parsed.set(text, query);
  return query;
}
