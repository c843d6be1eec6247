// The policy body as the operator puts it: the four limits, each a value or null, and optionally
// permissions (absent: null), nothing else. Checked by hand after the credential (as the update body
// is), one sentence per problem.
import { TypeCompiler } from 'elysia/type-system';
import { Credits, RateLimit, settingRule } from '../apikeys/model';
import { heldPermissionsProblem } from '../permissions/names';

/** Required, each a value or null. */
export const POLICY_PROPERTIES = ['ratelimit', 'credits', 'maxKeys', 'maxLevel'] as const;
/** Every property a policy body may have: the four, and permissions, which may be left out (null). */
const BODY_PROPERTIES: readonly string[] = [...POLICY_PROPERTIES, 'permissions'];
export const MAX_KEYS_BOUNDS = { min: 1, max: 1_000_000 } as const;

const rateLimit = TypeCompiler.Compile(RateLimit);
const credits = TypeCompiler.Compile(Credits);

const wholeIn = (value: unknown, min: number, max: number) =>
  typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;

/** The body checked, or the sentence saying what is wrong with it. */
export function policyBodyProblem(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return `The body must be a JSON object with ${POLICY_PROPERTIES.join(', ')} (each may be null) and optionally permissions.`;
  }
  const fields = body as Record<string, unknown>;
  const unknown = Object.keys(fields).find((name) => !BODY_PROPERTIES.includes(name));
  if (unknown !== undefined) {
    return `Unknown property "${unknown.slice(0, 40)}": the body takes only ${BODY_PROPERTIES.join(', ')}.`;
  }
  const missing = POLICY_PROPERTIES.find((name) => !(name in fields));
  if (missing !== undefined) return `${missing} is required (null for none).`;
  const { ratelimit, credits: pool, maxKeys, maxLevel } = fields;
  if (ratelimit !== null && !rateLimit.Check(ratelimit)) return `${settingRule('ratelimit')} Or null.`;
  if (pool !== null && !credits.Check(pool)) return `${settingRule('credits')} Or null.`;
  if (maxKeys !== null && !wholeIn(maxKeys, MAX_KEYS_BOUNDS.min, MAX_KEYS_BOUNDS.max)) {
    return `maxKeys must be an integer from ${MAX_KEYS_BOUNDS.min} to ${MAX_KEYS_BOUNDS.max}, or null.`;
  }
  if (maxLevel !== null && !wholeIn(maxLevel, 0, 8))
    return 'maxLevel must be an integer from 0 to 8, or null.';
  if (fields.permissions != null) {
    const problem = heldPermissionsProblem(fields.permissions);
    if (problem !== undefined) return `${problem} Or null.`;
  }
  return undefined;
}
