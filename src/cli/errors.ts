// The CLI's own failures: both end the process with one line per message and exit code 2.

/** A command line keygate cannot act on: an unknown command or flag, a missing or bad value. */
export class UsageError extends Error {}

/** A command that could not do its work: a port taken, a database that cannot be opened. */
export class StartupError extends Error {}

export const EXIT_USAGE = 2;
