// Forward-auth's rules for routes (FORWARD_AUTH_RULES_FILE): reading the rules file, finding
// the request a proxy asks about, normalising its path as the upstream will see it, and the first
// rule that matches. Normalising first matters: a rule for /admin/* must also catch
// /public/../admin/x and /%61dmin/x, which the upstream serves as /admin/x.
import { isLevel, LEVEL_RULE } from '../core/levels';

export type RouteRule<Q> = {
  /** The rule's place in the file, counted from 1, as the file's error messages count. */
  index: number;
  /** Upper-case method names; absent: every method. */
  methods?: ReadonlySet<string>;
  /** `prefix` values are written without their `/*` (`/documents`, or `` for `/*`). */
  path: { kind: 'exact' | 'prefix'; value: string } | { kind: 'any' };
  permissions?: Q;
  minLevel?: number;
  allow: 'credential' | 'anyone';
};

/** A rules file that cannot be used: one sentence naming the rule and what is wrong with it. */
export class RouteRulesError extends Error {
  override name = 'RouteRulesError';
}

/** A request path forward-auth will not match against the rules (the edge answers 400). */
export class PathRefusedError extends Error {
  override name = 'PathRefusedError';
}

const PROPERTIES = ['methods', 'path', 'permissions', 'minLevel', 'allow'];
// RFC 9110 §5.6.2: a method is a token.
const METHOD_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const SHOWN_RULE_LENGTH = 60;

/**
 * The rules in `text` (a JSON array; empty: no rules), each rule's `permissions` query parsed by
 * `parsePermissions` (whose error messages are passed on). Besides the contract's shape:
 * - a rule's `path` must already be normalised (written as requests are matched), so that what the
 *   file says is what is compared; the message shows the normal form;
 * - `*` may only be the whole path or end a prefix `/*`, never stand inside one, so no reader takes
 *   `/docs*` or `/a/*.pdf` for a pattern it is not;
 * - `"allow": "anyone"` with `permissions` or `minLevel` is refused: nothing would be checked, so
 *   the file would say something that does not happen.
 */
export function parseRouteRules<Q>(text: string, parsePermissions: (query: string) => Q): RouteRule<Q>[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new RouteRulesError(`the file is not JSON: ${(error as Error).message}`);
  }
  if (!Array.isArray(parsed)) {
    throw new RouteRulesError('the file must be a JSON array of rules (an empty array for none).');
  }
  return parsed.map((rule: unknown, position) => {
    const index = position + 1;
    const refuse: Refuse = (problem) => {
      throw new RouteRulesError(`rule ${index} (${shown(rule)}): ${problem}`);
    };
    if (typeof rule !== 'object' || rule === null || Array.isArray(rule)) {
      return refuse('must be an object with a path.');
    }
    const fields = rule as Record<string, unknown>;
    const unknown = Object.keys(fields).find((name) => !PROPERTIES.includes(name));
    if (unknown !== undefined) {
      refuse(`${JSON.stringify(unknown)} is not a property of a rule (those are ${PROPERTIES.join(', ')}).`);
    }
    const parsedRule: RouteRule<Q> = {
      index,
      path: pathOf(fields.path, refuse),
      allow: allowOf(fields.allow, refuse),
    };
    if (fields.methods !== undefined) parsedRule.methods = methodsOf(fields.methods, refuse);
    if (fields.minLevel !== undefined) {
      if (!isLevel(fields.minLevel)) refuse(`minLevel must be ${LEVEL_RULE}.`);
      parsedRule.minLevel = fields.minLevel;
    }
    if (fields.permissions !== undefined) {
      if (typeof fields.permissions !== 'string')
        refuse('permissions must be a string (a permissions query).');
      try {
        parsedRule.permissions = parsePermissions(fields.permissions);
      } catch (error) {
        refuse(`permissions: ${(error as Error).message}`);
      }
    }
    if (
      parsedRule.allow === 'anyone' &&
      (fields.permissions !== undefined || fields.minLevel !== undefined)
    ) {
      refuse(
        'a rule that allows anyone checks no credential, so it cannot also ask for permissions or a minLevel.',
      );
    }
    return parsedRule;
  });
}

type Refuse = (problem: string) => never;

function pathOf(path: unknown, refuse: Refuse): RouteRule<never>['path'] {
  if (typeof path !== 'string')
    return refuse('path must be a string: an exact path, a prefix ending in /*, or *.');
  if (path === '*') return { kind: 'any' };
  const isPrefix = path.endsWith('/*');
  // The prefix is checked with its trailing slash, so `/docs//*` (which nothing normalised matches) is refused.
  const written = isPrefix ? path.slice(0, -1) : path;
  if (!written.startsWith('/')) refuse('path must start with / (or be * for every path).');
  if (written.includes('*')) refuse('path may hold * only as the whole path or at the end of a prefix /*.');
  let normal: string;
  try {
    normal = normalisedPath(written);
  } catch (error) {
    // normalisedPath's sentences begin "The path"; here they continue the rule's name.
    return refuse((error as Error).message.replace(/^The path/, 'path'));
  }
  if (normal !== written) {
    refuse(
      `path is not written as requests are matched: write ${JSON.stringify(isPrefix ? `${normal}*` : normal)}.`,
    );
  }
  return isPrefix ? { kind: 'prefix', value: written.slice(0, -1) } : { kind: 'exact', value: written };
}

function allowOf(allow: unknown, refuse: Refuse): RouteRule<never>['allow'] {
  if (allow === undefined) return 'credential';
  if (allow !== 'credential' && allow !== 'anyone') return refuse('allow must be "credential" or "anyone".');
  return allow;
}

// HTTP methods are case-sensitive, but some upstreams (Express among them) route `delete` as DELETE;
// comparing upper-cased keeps a rule for DELETE from being stepped around with a lower-case method.
function methodsOf(methods: unknown, refuse: Refuse): ReadonlySet<string> {
  if (!Array.isArray(methods) || methods.length === 0) {
    return refuse('methods must be a non-empty array of HTTP methods.');
  }
  for (const method of methods) {
    if (typeof method !== 'string' || !METHOD_TOKEN.test(method)) {
      refuse(`methods holds ${shown(method)}, which is not an HTTP method.`);
    }
  }
  return new Set(methods.map((method: string) => method.toUpperCase()));
}

function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > SHOWN_RULE_LENGTH ? `${text.slice(0, SHOWN_RULE_LENGTH)}...` : text;
}

const HEX_PAIR = /^[0-9A-Fa-f]{2}$/;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
// Characters a path may hold as they are (RFC 3986 pchar without pct-encoded, and `/`); other
// visible ASCII is written %XX, as the upstream's decoder reads both the same.
const PATH_CHARACTER = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/]$/;

/**
 * The path of a request target as an upstream would see it: query and fragment dropped, escapes of
 * unreserved characters decoded (`%7E` → `~`, `%2e%2e` → `..`), other escapes in upper case, other
 * visible ASCII the path may not hold as is escaped (`{` → `%7B`), `.` and `..` segments resolved and
 * repeated slashes collapsed (`//a///b` → `/a/b`). Throws PathRefusedError for a path that does not
 * start with `/`, climbs above the root, holds an encoded slash, a backslash (raw or encoded), a NUL
 * (raw or encoded), a bad escape, a control character, a space or a non-ASCII character (a request
 * target is ASCII, and reading raw bytes as the upstream does is guesswork), or a dot segment with
 * parameters (`..;`, which Tomcat-style upstreams resolve as `..`).
 */
export function normalisedPath(raw: string): string {
  const end = raw.search(/[?#]/);
  const path = end === -1 ? raw : raw.slice(0, end);
  if (!path.startsWith('/')) throw new PathRefusedError('The path must start with /.');
  let decoded = '';
  for (let at = 0; at < path.length; at++) {
    const character = path[at] as string;
    if (character === '%') {
      const hex = path.slice(at + 1, at + 3);
      if (!HEX_PAIR.test(hex))
        throw new PathRefusedError('The path holds a % that does not start an escape %XX.');
      const byte = String.fromCharCode(Number.parseInt(hex, 16));
      if (byte === '/') throw new PathRefusedError('The path holds an encoded slash (%2F).');
      if (byte === '\\') throw new PathRefusedError('The path holds an encoded backslash (%5C).');
      if (byte === '\0') throw new PathRefusedError('The path holds an encoded NUL (%00).');
      decoded += UNRESERVED.test(byte) ? byte : `%${hex.toUpperCase()}`;
      at += 2;
    } else if (PATH_CHARACTER.test(character)) {
      decoded += character;
    } else if (character === '\\') {
      throw new PathRefusedError('The path holds a backslash.');
    } else if (character === '\0') {
      throw new PathRefusedError('The path holds a NUL.');
    } else if (character > ' ' && character < '\x7f') {
      decoded += `%${character.charCodeAt(0).toString(16).toUpperCase()}`;
    } else {
      throw new PathRefusedError(
        'The path holds a control character, a space or a non-ASCII character; escape it as %XX.',
      );
    }
  }
  return withoutDotSegments(decoded);
}

/** RFC 3986 §5.2.4 remove_dot_segments over non-empty segments, refusing to climb above the root. */
function withoutDotSegments(path: string): string {
  const segments = path.split('/');
  const kept: string[] = [];
  for (const segment of segments) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (kept.pop() === undefined) throw new PathRefusedError('The path climbs above the root (..).');
      continue;
    }
    const beforeParameters = segment.split(';', 1)[0];
    if (beforeParameters === '.' || beforeParameters === '..') {
      throw new PathRefusedError('The path holds a dot segment with parameters (such as ..;).');
    }
    kept.push(segment);
  }
  // A path that ended in a directory (`/a/`, `/a/b/..`, `/a/.`) still does.
  const last = segments[segments.length - 1];
  const endsInDirectory = last === '' || last === '.' || last === '..';
  return kept.length === 0 ? '/' : `/${kept.join('/')}${endsInDirectory ? '/' : ''}`;
}

/**
 * The first rule whose methods (if it names any) hold `method` and whose path matches `path` (a
 * normalised path): exact equality; a prefix `/documents/*` matches `/documents`, `/documents/` and
 * everything below, never `/documentsx`; `*` matches every path.
 */
export function matchingRule<Q>(
  rules: readonly RouteRule<Q>[],
  method: string,
  path: string,
): RouteRule<Q> | undefined {
  const upperMethod = method.toUpperCase();
  return rules.find(
    (rule) => (rule.methods === undefined || rule.methods.has(upperMethod)) && pathMatches(rule.path, path),
  );
}

function pathMatches(rulePath: RouteRule<never>['path'], path: string): boolean {
  switch (rulePath.kind) {
    case 'any':
      return true;
    case 'exact':
      return path === rulePath.value;
    case 'prefix':
      return path === rulePath.value || path.startsWith(`${rulePath.value}/`);
  }
}

const SOURCES = [
  { method: 'x-forwarded-method', target: 'x-forwarded-uri' },
  { method: 'x-original-method', target: 'x-original-uri' },
] as const;

/**
 * The request the proxy asks about, as its method and target (path and query, not yet normalised):
 * `X-Forwarded-Method` + `X-Forwarded-Uri` (Traefik, Caddy), else `X-Original-Method` +
 * `X-Original-URI` (nginx, as the docs configure it), else `method` (the forward-auth request's own)
 * with `suffix`, the path after `/forward-auth` with its leading `/` and query (Envoy). Undefined when
 * none is there.
 *
 * Throws PathRefusedError when only half of a pair came, or when both pairs came and disagree: a
 * proxy overwrites its own pair but passes the client's headers on, so a client behind nginx could
 * otherwise send an X-Forwarded-Uri of its choosing, and one behind Traefik an X-Original-URI.
 */
export function forwardedRequestOf(
  headers: Headers,
  method: string,
  suffix: string | undefined,
): { method: string; target: string } | undefined {
  const found: { method: string; target: string }[] = [];
  for (const source of SOURCES) {
    const sourceMethod = headers.get(source.method);
    const target = headers.get(source.target);
    if (sourceMethod === null && target === null) continue;
    if (sourceMethod === null || target === null) {
      throw new PathRefusedError(`${source.method} and ${source.target} must come together.`);
    }
    found.push({ method: sourceMethod, target });
  }
  const [first, second] = found;
  if (first !== undefined && second !== undefined) {
    if (first.method.toUpperCase() !== second.method.toUpperCase() || first.target !== second.target) {
      throw new PathRefusedError('X-Forwarded-Method/Uri and X-Original-Method/URI name different requests.');
    }
  }
  if (first !== undefined) return first;
  if (suffix === undefined || suffix === '') return undefined;
  return { method, target: suffix };
}
