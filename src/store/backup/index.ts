// Store-level backup and restore: one async interface, a SQLite and a PostgreSQL implementation.
// - SQLite: SQLite's online backup API copies the whole file while other processes keep writing;
//   a restore builds the new file beside the old one and renames it into place.
// - PostgreSQL: every table, one NDJSON file each, read inside ONE `REPEATABLE READ READ ONLY`
//   transaction (a consistent snapshot); a restore truncates the tables and inserts the rows in one
//   transaction. Not pg_dump: the server and the pg_dump on a machine are often different major
//   versions (pg_dump refuses a newer server), and the rows alone are all a restore needs — the
//   schema comes from this build's migrations.
// A dump records the migrations it was taken at; a restore refuses a dump of another schema.
import type {Settings} from '../../config/schema.js'
import {storeTarget} from '../index.js'
import type {StoreBackup} from './dump.js'
import {SqliteStoreBackup} from './sqlite.js'

export * from './dump.js'

/** The backup side of the configured store. Opens nothing for SQLite until it is used. */
export async function openStoreBackup(settings: Settings): Promise<StoreBackup> {
  const target = storeTarget(settings)
  if (target.backend === 'sqlite') return new SqliteStoreBackup(target.file, settings)
  // pg loads only for a PostgreSQL store, as in openStore.
  const {PostgresStoreBackup} = await import('./postgres.js')
  return PostgresStoreBackup.open(target.url, target.location, settings)
}
