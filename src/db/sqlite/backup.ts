// `keygate backup`: a consistent copy of a SQLite database that may be serving. VACUUM INTO reads one
// snapshot (a read transaction, which in WAL mode neither waits for the server's writes nor holds them
// up) and writes it to a new file; every commit made before it began is in the copy.
import { Database } from 'bun:sqlite';
import { closeSync, openSync, rmSync } from 'node:fs';
import { applyPragmas, DATABASE_FILE_MODE } from './open';

/**
 * Copies the database at `source` to `target`, a file that must not exist yet (an error with code
 * EEXIST otherwise). The copy has the owner-only mode of a database keygate creates and, with
 * synchronous=FULL, is on disk when this returns.
 */
export function backupDatabase(source: string, target: string): void {
  // Created here, empty and exclusively (VACUUM INTO accepts an empty file): no race with another
  // file of that name, and a mode umask cannot widen.
  closeSync(openSync(target, 'wx', DATABASE_FILE_MODE));
  try {
    const client = new Database(source, { readwrite: true, create: false, strict: true });
    try {
      applyPragmas(client);
      client.run('VACUUM INTO ?', [target]);
    } finally {
      client.close();
    }
  } catch (error) {
    rmSync(target, { force: true });
    throw error;
  }
}
