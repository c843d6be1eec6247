// Environment variables that look like a mistyped setting (PROT=4350 for PORT): one warning each, so
// a typo is not silently ignored while the default is used. The ordinary environment (PATH, HOME,
// HOSTNAME, PWD…) is never named: only near misses of a setting's name count.
import { SETTINGS, type SettingName } from '../config';

const NAMES = Object.keys(SETTINGS) as SettingName[];
/** JWT_, DATABASE_, METRICS_…: a variable with one of these is a setting's, whatever its case. */
const PREFIXES = [
  ...new Set(NAMES.filter((name) => name.includes('_')).map((name) => name.split('_')[0])),
].map((prefix) => `${prefix}_`);

/** `unknown setting PROT: did you mean PORT?`, one per variable that is a near miss, sorted by name. */
export function unknownSettingWarnings(env: Record<string, string | undefined>): string[] {
  return Object.keys(env)
    .sort()
    .flatMap((variable) => {
      const meant = settingMeant(variable);
      return meant === undefined ? [] : [`unknown setting ${variable}: did you mean ${meant}?`];
    });
}

/** The setting `variable` is a near miss of, if it is not a setting itself. */
export function settingMeant(variable: string): SettingName | undefined {
  if ((NAMES as string[]).includes(variable)) return undefined;
  const upper = variable.toUpperCase();
  const looksLikeSetting =
    /^[A-Z][A-Z0-9_]*$/.test(variable) ||
    PREFIXES.some((prefix) => upper.startsWith(prefix)) ||
    (NAMES as string[]).includes(upper);
  if (!looksLikeSetting) return undefined;
  let best: { name: SettingName; distance: number } | undefined;
  for (const name of NAMES) {
    // One edit in a four-letter name is already a different word (HOME is two from HOST).
    const allowed = name.length <= 5 ? 1 : 2;
    const distance = editDistance(upper, name, allowed);
    if (distance <= allowed && (best === undefined || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/**
 * Damerau-Levenshtein distance (optimal string alignment: an adjacent swap is one edit), or
 * `bound + 1` once it is certainly above `bound`.
 */
export function editDistance(a: string, b: string, bound = Number.POSITIVE_INFINITY): number {
  if (Math.abs(a.length - b.length) > bound) return bound + 1;
  let previous2: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(
        (previous[j] as number) + 1,
        (current[j - 1] as number) + 1,
        (previous[j - 1] as number) + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        value = Math.min(value, (previous2[j - 2] as number) + 1);
      }
      current[j] = value;
      rowMin = Math.min(rowMin, value);
    }
    if (rowMin > bound) return bound + 1;
    previous2 = previous;
    previous = current;
  }
  return Math.min(previous[b.length] as number, bound + 1);
}
