// What a permission may be written as: the names a query asks for, and the lists a key or a user
// policy holds (names, `x.*` wildcards and `*`), checked with one sentence naming the first problem.

export const MAX_HELD_PERMISSIONS = 100;
export const MAX_PERMISSION_LENGTH = 128;

/** The characters of a permission name, as the sentences name them. */
export const NAME_CHARACTERS = 'A–Z a–z 0–9 . _ : - /';

/** What a key or a user policy may hold, for a schema's description or a sentence's end. */
export const PERMISSION_RULE =
  `An array of 1 to ${MAX_HELD_PERMISSIONS} distinct permissions, each 1 to ${MAX_PERMISSION_LENGTH} ` +
  `characters of ${NAME_CHARACTERS} (such as "documents.read"), optionally ending in ".*" to cover ` +
  'every permission below it ("documents.*"), or exactly "*" to cover all.';

const NOT_A_NAME_CHARACTER = /[^A-Za-z0-9._:/-]/;

/** Where `text` first holds a character no permission name may hold, or -1. */
export function firstNonNameCharacter(text: string): number {
  return text.search(NOT_A_NAME_CHARACTER);
}

/** A name as a query asks for it: no wildcard. */
export function isPermissionName(text: string): boolean {
  return text.length >= 1 && text.length <= MAX_PERMISSION_LENGTH && firstNonNameCharacter(text) === -1;
}

/** `text` quoted for a sentence: escaped, and cut at 40 characters so one value cannot flood a log line. */
export function quoted(text: string): string {
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

function kindOf(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** The problem with one held entry, in words that follow its place (`permissions[3] "x" …`). */
function heldEntryProblem(entry: string): string | undefined {
  if (entry === '*') return undefined;
  if (entry.length === 0) return `is empty; a permission is 1 to ${MAX_PERMISSION_LENGTH} characters`;
  if (entry.length > MAX_PERMISSION_LENGTH) {
    return `is ${entry.length} characters long; a permission is at most ${MAX_PERMISSION_LENGTH} (".*" included)`;
  }
  // The wildcard covers what begins with the text before its `*`, so that text must be a name of
  // its own: `.*` alone would cover only names starting with "." and is surely a mistake for `*`.
  const name = entry.endsWith('.*') ? entry.slice(0, -2) : entry;
  if (name.length === 0) return 'names nothing before ".*"; "*" alone holds every permission';
  const at = firstNonNameCharacter(name);
  if (at === -1) return undefined;
  if (name[at] === '*') {
    return `has "*" at character ${at + 1}; "*" may only stand alone ("*") or end a permission after "." ("documents.*")`;
  }
  const character = String.fromCodePoint(name.codePointAt(at) ?? 0);
  return `has ${JSON.stringify(character)} at character ${at + 1}; a permission holds only ${NAME_CHARACTERS}`;
}

/**
 * The first problem with a list a key or a user policy would hold, as one sentence naming its
 * place (`permissions[3] "docs.**" …`), or undefined when the list is fine.
 */
export function heldPermissionsProblem(value: unknown, property = 'permissions'): string | undefined {
  if (!Array.isArray(value)) {
    return `${property} must be an array of 1 to ${MAX_HELD_PERMISSIONS} permissions, not ${kindOf(value)}.`;
  }
  if (value.length === 0) return `${property} must hold at least 1 permission.`;
  if (value.length > MAX_HELD_PERMISSIONS) {
    return `${property} holds ${value.length} permissions; at most ${MAX_HELD_PERMISSIONS} are allowed.`;
  }
  const seenAt = new Map<string, number>();
  for (const [index, entry] of value.entries()) {
    const place = `${property}[${index}]`;
    if (typeof entry !== 'string') return `${place} must be a string, not ${kindOf(entry)}.`;
    const problem = heldEntryProblem(entry);
    if (problem !== undefined) return `${place} ${quoted(entry)} ${problem}.`;
    const earlier = seenAt.get(entry);
    if (earlier !== undefined) return `${place} ${quoted(entry)} repeats ${property}[${earlier}].`;
    seenAt.set(entry, index);
  }
  return undefined;
}
