// What a store dump is and the interface both backends implement (see ./index.ts).
import {KitError} from '../../errors.js'
import type {Backend} from '../context.js'
import type {Repositories} from '../index.js'
import {migrations} from '../migrations/index.js'

/** What a dump holds, as the backup manifest records it. */
export interface StoreDumpInfo {
  backend: Backend
  /** Migrations applied to the dumped store, sorted. */
  migrations: string[]
  /** Every table (the migrator's own left out) with its row count; PostgreSQL: in restore order, parents first. */
  tables: Array<{name: string; rows: number}>
}

export interface StoreDump extends StoreDumpInfo {
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

export const SQLITE_DUMP_FILE = 'edgeworkers.sqlite'

/** A PostgreSQL dump's file for one table. */
export function tableFile(table: string): string {
  return `${table}.ndjson`
}

/** The files a dump consists of, relative to its directory. */
export function dumpFiles(dump: StoreDumpInfo): string[] {
  return dump.backend === 'sqlite' ? [SQLITE_DUMP_FILE] : dump.tables.map((table) => tableFile(table.name))
}

/** This build's migrations, in order. */
function buildMigrations(): string[] {
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
