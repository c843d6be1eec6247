// What a holder's permissions cover, and what they let it grant. A list is compiled once into sets,
// so a check costs one lookup per "." in the asked name, however many permissions are held.

/** A list of permissions compiled for checks; build it with `heldPermissions`. */
export type HeldPermissions = {
  /** `*` is held. */
  readonly all: boolean;
  /** The names held as they are. */
  readonly exact: ReadonlySet<string>;
  /** Each held `x.*` as `x.`: what a covered name begins with. */
  readonly prefixes: ReadonlySet<string>;
};

const HOLDS_NONE: HeldPermissions = Object.freeze({
  all: false,
  exact: new Set<string>(),
  prefixes: new Set<string>(),
});

/**
 * Compiles what a key, a policy or a token's scope holds; null, undefined or empty holds none. Not
 * validated here: a token's scope may hold anything, and an entry that is no permission matches nothing.
 */
export function heldPermissions(list: readonly string[] | null | undefined): HeldPermissions {
  if (list == null || list.length === 0) return HOLDS_NONE;
  const exact = new Set<string>();
  const prefixes = new Set<string>();
  for (const entry of list) {
    if (entry.endsWith('.*')) prefixes.add(entry.slice(0, -1));
    else exact.add(entry);
  }
  return { all: exact.has('*'), exact, prefixes };
}

/** Whether one of the held `x.*` covers `text`: some held `x.` is `text` up to one of its dots. */
function coveredByWildcard(held: HeldPermissions, text: string): boolean {
  if (held.prefixes.size === 0) return false;
  for (let dot = text.indexOf('.'); dot !== -1; dot = text.indexOf('.', dot + 1)) {
    if (held.prefixes.has(text.slice(0, dot + 1))) return true;
  }
  return false;
}

/**
 * Whether the holder has the permission `name` asks for (no wildcard in it): held as is, under a
 * held `x.*` (`documents.*` covers `documents.read` and `documents.comments.write`, not `documents`),
 * or by `*`. Case-sensitive.
 */
export function holds(held: HeldPermissions, name: string): boolean {
  return held.all || held.exact.has(name) || coveredByWildcard(held, name);
}

/**
 * Whether the holder may grant `granted` to a key: a name it holds; `x.*` only under a held wildcard
 * at or above it (`documents.*` grants `documents.*` and `documents.comments.*`; `documents.read`
 * grants no wildcard); `*` only with `*`.
 */
export function grants(held: HeldPermissions, granted: string): boolean {
  if (held.all) return true;
  if (granted === '*') return false;
  if (granted.endsWith('.*')) return coveredByWildcard(held, granted.slice(0, -1));
  return holds(held, granted);
}

/** The first of `granted` the holder may not grant, or undefined when it may grant them all. */
export function firstUngranted(held: HeldPermissions, granted: readonly string[]): string | undefined {
  return granted.find((permission) => !grants(held, permission));
}

/** The first of `next` that `old` does not cover: a key updating itself may only narrow. */
export function narrowedWithin(
  old: readonly string[] | null | undefined,
  next: readonly string[],
): string | undefined {
  return firstUngranted(heldPermissions(old), next);
}

/**
 * An asked name with the prefixes a wildcard covering it would have (`documents.comments.write` →
 * `documents.`, `documents.comments.`), worked out once so that a compiled query checks without
 * building strings.
 */
export type AskedPermission = { readonly name: string; readonly wildcardPrefixes: readonly string[] };

export function askedPermission(name: string): AskedPermission {
  const wildcardPrefixes: string[] = [];
  for (let dot = name.indexOf('.'); dot !== -1; dot = name.indexOf('.', dot + 1)) {
    wildcardPrefixes.push(name.slice(0, dot + 1));
  }
  return { name, wildcardPrefixes };
}

/** `holds` for a name worked out by `askedPermission`. */
export function holdsAsked(held: HeldPermissions, asked: AskedPermission): boolean {
  if (held.all || held.exact.has(asked.name)) return true;
  if (held.prefixes.size === 0) return false;
  const prefixes = asked.wildcardPrefixes;
  for (let i = 0; i < prefixes.length; i++) {
    if (held.prefixes.has(prefixes[i] as string)) return true;
  }
  return false;
}
