// Backup and restore of the embedded SQLite store (see ./index.ts).
import {existsSync} from 'node:fs'
import {chmod, copyFile, mkdir, rename, rm} from 'node:fs/promises'
import path from 'node:path'
import Database from 'better-sqlite3'
import type {Settings} from '../../config/schema.js'
import {KitError} from '../../errors.js'
import {syncPath} from '../../util/atomic-file.js'
import {StoreContext, systemClock} from '../context.js'
import {repositoriesFor} from '../index.js'
import {openSqlite} from '../sqlite/open.js'
import {assertDumpMatchesBuild, SQLITE_DUMP_FILE, type SealRestoredStore, type StoreBackup, type StoreDump, type StoreDumpInfo} from './dump.js'

const MIGRATION_TABLE = 'kysely_migration'

export class SqliteStoreBackup implements StoreBackup {
  readonly backend = 'sqlite' as const

  constructor(
    private readonly file: string,
    private readonly settings: Settings,
  ) {}

  get location(): string {
    return this.file
  }

  async dump(dir: string): Promise<StoreDump> {
    if (!existsSync(this.file)) throw new KitError('store_unavailable', `SQLite store ${this.file} does not exist`)
    const target = path.join(dir, SQLITE_DUMP_FILE)
    const source = new Database(this.file, {readonly: true, fileMustExist: true, timeout: this.settings.store.sqlite_busy_timeout_ms})
    try {
      await source.backup(target)
    } finally {
      source.close()
    }
    await chmod(target, 0o600)
    const copy = new Database(target)
    try {
      // One self-contained file: no WAL beside it, whatever mode the live store runs in.
      copy.pragma('journal_mode = DELETE')
      const hasMigrations = copy.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(MIGRATION_TABLE) !== undefined
      const migrations = hasMigrations
        ? (copy.prepare(`SELECT name FROM ${MIGRATION_TABLE} ORDER BY name`).all() as Array<{name: string}>).map((row) => row.name)
        : []
      const names = copy
        .prepare(
          `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE 'kysely\\_%' ESCAPE '\\' ORDER BY name`,
        )
        .all() as Array<{name: string}>
      const tables = names.map(({name}) => ({name, rows: (copy.prepare(`SELECT COUNT(*) AS count FROM "${name}"`).get() as {count: number}).count}))
      const keys = copy.prepare('SELECT project_artifact_key AS project, bundle_artifact_key AS bundle FROM edge_worker_versions').all() as Array<{
        project: string
        bundle: string
      }>
      return {backend: 'sqlite', migrations, tables, artifactKeys: [...new Set(keys.flatMap((key) => [key.project, key.bundle]))].sort()}
    } finally {
      copy.close()
    }
  }

  async checkRestorable(dump: StoreDumpInfo): Promise<void> {
    assertDumpMatchesBuild(dump)
    this.assertNotInUse()
  }

  async restore(dir: string, dump: StoreDumpInfo, seal: SealRestoredStore): Promise<void> {
    await this.checkRestorable(dump)
    await mkdir(path.dirname(this.file), {recursive: true, mode: 0o700})
    // Built beside the store, then renamed over it: a reader sees the old file or the new one.
    const temporary = `${this.file}.restore-${process.pid}.tmp`
    await removeDatabaseFiles(temporary)
    try {
      await copyFile(path.join(dir, SQLITE_DUMP_FILE), temporary)
      await chmod(temporary, 0o600)
      const db = openSqlite(temporary, this.settings)
      try {
        await seal(repositoriesFor(new StoreContext(db, {backend: 'sqlite', clock: systemClock}, false)))
      } finally {
        // The last connection to close checkpoints the WAL into the file and deletes it.
        await db.destroy()
      }
      await syncPath(temporary)
      this.assertNotInUse()
      // A WAL left by the old file would be replayed into the new one.
      await rm(`${this.file}-wal`, {force: true})
      await rm(`${this.file}-shm`, {force: true})
      await rename(temporary, this.file)
      await syncPath(path.dirname(this.file))
    } finally {
      await removeDatabaseFiles(temporary)
    }
  }

  async close(): Promise<void> {}

  /**
   * Replacing the file under an open connection would lose that process's writes (it keeps the old
   * file): take SQLite's exclusive lock once, which fails while any other connection is open.
   */
  private assertNotInUse(): void {
    if (!existsSync(this.file)) return
    let db: Database.Database | undefined
    try {
      db = new Database(this.file, {fileMustExist: true, timeout: 0})
      db.pragma('locking_mode = EXCLUSIVE')
      db.exec('BEGIN EXCLUSIVE; COMMIT')
    } catch (error) {
      if ((error as {code?: string}).code?.startsWith('SQLITE_BUSY')) {
        throw new KitError(
          'conflict',
          `SQLite store ${this.file} is open in another process (a command, a reconcile pass, the TUI); stop them before restoring`,
        )
      }
      throw new KitError('store_unavailable', `SQLite store ${this.file} cannot be opened: ${(error as Error).message}`)
    } finally {
      db?.close()
    }
  }
}

async function removeDatabaseFiles(file: string): Promise<void> {
  for (const suffix of ['', '-wal', '-shm', '-journal']) await rm(`${file}${suffix}`, {force: true})
}
