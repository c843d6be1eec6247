// Reaching past the store, for tests that seed or inspect the database directly: raw SQL with
// `$1`-style parameters on either engine, and the bun:sqlite handle on SQLite.
import type { Database } from 'bun:sqlite';
import type { OpenedStore } from '../../src/keygate';

export async function rawQuery(
  { client }: Pick<OpenedStore, 'client'>,
  query: string,
  params: unknown[] = [],
): Promise<Record<string, unknown>[]> {
  if (client.engine === 'postgres') return client.sql.unsafe(query, params as never[]);
  // bun:sqlite numbers its parameters ?1, ?2…
  return client.sqlite.query(query.replace(/\$(\d+)/g, '?$1')).all(...(params as never[])) as Record<
    string,
    unknown
  >[];
}

/** The bun:sqlite handle (fault tests hold its locks); undefined on PostgreSQL. */
export function sqliteOf({ client }: Pick<OpenedStore, 'client'>): Database | undefined {
  return client.engine === 'sqlite' ? client.sqlite : undefined;
}
