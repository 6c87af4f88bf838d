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
import {KitError} from '../../errors.js'
import type {Backend} from '../context.js'
import {storeTarget, type Repositories} from '../index.js'
import {migrations} from '../migrations/index.js'
import {SqliteStoreBackup} from './sqlite.js'

/** What a dump holds, as the backup manifest records it. */
export interface StoreDumpInfo {
  backend: Backend
  /** Migrations applied to the dumped store, sorted. */
  migrations: string[]
  /** Every table (the migrator's own left out) with its row count; PostgreSQL: in restore order, parents first. */
  tables: Array<{name: string; rows: number}>
}

export interface StoreDump extends StoreDumpInfo {
  /** The files written, relative to the dump directory. */
  files: string[]
  /** Every artifact key a dumped version references (the backup must hold each one). */
  artifactKeys: string[]
}

/**
 * Runs on the restored rows before any other process can see them (SQLite: the new file before it
 * is renamed into place; PostgreSQL: inside the restoring transaction).
 */
export type SealRestoredStore = (store: Repositories) => Promise<void>

export interface StoreBackup {
  readonly backend: Backend
  /** Where the store is, safe to print. */
  readonly location: string
  /** Writes a consistent copy of the whole store into `dir` (an existing, empty directory). */
  dump(dir: string): Promise<StoreDump>
  /** Throws a KitError, having changed nothing, when this store cannot take `dump`. */
  checkRestorable(dump: StoreDumpInfo): Promise<void>
  /** Replaces the whole store — every scope in it — with the dump in `dir`. */
  restore(dir: string, dump: StoreDumpInfo, seal: SealRestoredStore): Promise<void>
  close(): Promise<void>
}

/** The backup side of the configured store. Opens nothing for SQLite until it is used. */
export async function openStoreBackup(settings: Settings): Promise<StoreBackup> {
  const target = storeTarget(settings)
  if (target.backend === 'sqlite') return new SqliteStoreBackup(target.file, settings)
  // pg loads only for a PostgreSQL store, as in openStore.
  const {PostgresStoreBackup} = await import('./postgres.js')
  return PostgresStoreBackup.open(target.url, target.location, settings)
}

/** This build's migrations, in order. */
export function buildMigrations(): string[] {
  return Object.keys(migrations).sort()
}

/** A dump taken at another schema cannot be restored by this build. */
export function assertDumpMatchesBuild(dump: StoreDumpInfo): void {
  const build = buildMigrations()
  if (!sameList(dump.migrations, build)) {
    throw new KitError(
      'usage',
      `the backup's store is at schema [${dump.migrations.join(', ')}]; this build restores [${build.join(', ')}] — restore it with the edgeworkers version that took it`,
    )
  }
}

export function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((item, index) => item === b[index])
}
