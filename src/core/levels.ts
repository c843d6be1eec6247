// Privilege levels: an integer from MIN_LEVEL to MAX_LEVEL. A caller acts on keys at or below its own.
export const MIN_LEVEL = 0;
export const MAX_LEVEL = 8;

/** An integer within the level range (a JSON number; "3" and 1.5 are not levels). */
export function isLevel(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= MIN_LEVEL && value <= MAX_LEVEL;
}

export const LEVEL_RULE = `an integer from ${MIN_LEVEL} to ${MAX_LEVEL}`;
