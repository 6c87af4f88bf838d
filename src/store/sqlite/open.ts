// Opens the embedded SQLite store: WAL (readers never block the writer), durable commits by default
// (synchronous=FULL fsyncs every commit), foreign keys enforced (company purge cascades).
import path from 'node:path'
import Database from 'better-sqlite3'
import {Kysely} from 'kysely'
import type {Settings} from '../../config/schema.js'
import {KitError, messageOf} from '../../errors.js'
import {assertPrivate, createPrivateFile, ensurePrivateDir} from '../../util/private-files.js'
import type {Database as Schema} from '../schema.js'
import {ImmediateSqliteDialect} from './dialect.js'

/** How long SQLite itself waits for a lock before the dialect's asynchronous retry takes over. */
const SYNCHRONOUS_WAIT_SLICE_MS = 10

export const DEFAULT_SQLITE_FILE = 'edgeworkers.sqlite'

export function openSqlite(file: string, settings: Settings): Kysely<Schema> {
  let database: Database.Database
  try {
    // Only the default location (inside the data dir) is created; an explicit path must be in an
    // existing directory. The file holds the pairing secret: private, like the data dir.
    if (file === path.join(settings.data_dir, DEFAULT_SQLITE_FILE)) ensurePrivateDir(settings.data_dir)
    createPrivateFile(file)
    // Opening may wait the whole budget (switching a new file to WAL needs it exclusively once).
    database = new Database(file, {timeout: settings.store.sqlite_busy_timeout_ms})
  } catch (error) {
    if (error instanceof KitError) throw error
    throw unavailable(file, error)
  }
  try {
    const mode = database.pragma('journal_mode = WAL', {simple: true})
    if (mode !== 'wal') throw new Error(`the file system does not support WAL (journal_mode stayed ${String(mode)})`)
    database.pragma(`synchronous = ${settings.store.sqlite_synchronous.toUpperCase()}`)
    database.pragma('foreign_keys = ON')
    database.pragma(`busy_timeout = ${Math.min(SYNCHRONOUS_WAIT_SLICE_MS, settings.store.sqlite_busy_timeout_ms)}`)
    // Checked once it is known to be a store (a file that is not one is reported as such).
    assertPrivate(file, 'file')
  } catch (error) {
    database.close()
    if (error instanceof KitError) throw error
    throw unavailable(file, error)
  }
  const dialect = new ImmediateSqliteDialect({database, location: file, busyBudgetMs: settings.store.sqlite_busy_timeout_ms})
  return new Kysely<Schema>({dialect})
}

function unavailable(file: string, error: unknown): KitError {
  const reason = messageOf(error)
  return new KitError('store_unavailable', `SQLite store ${file} cannot be opened: ${reason}`)
}
