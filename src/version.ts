// The version keygate reports, taken from package.json at build time.
import pkg from '../package.json' with { type: 'json' };

export const VERSION: string = pkg.version;
