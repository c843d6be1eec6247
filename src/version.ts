// The version keygate reports, taken from package.json at build time, and the commit it was built
// from: scripts/ci/build.ts defines KEYGATE_COMMIT (git rev-parse HEAD, or "unknown" outside a checkout).
import pkg from '../package.json' with { type: 'json' };

declare const KEYGATE_COMMIT: string | undefined;

export const VERSION: string = pkg.version;
/** What keygate is, in one line: package.json's description (also the image's description label). */
export const TAGLINE: string = pkg.description;
/** Run from source, nothing defines it: "unknown". */
export const COMMIT: string = typeof KEYGATE_COMMIT === 'string' ? KEYGATE_COMMIT : 'unknown';
