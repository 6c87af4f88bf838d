// The host state's SQLite file (better-sqlite3, WAL, synchronous=FULL): opened and migrated to this
// build's schema, with cached statements. Reads run anywhere; a statement that changes the file runs
// only through a WriteTx, which only `write()` hands out, for as long as its transaction is open.
import Database from 'better-sqlite3'
import {KitError, messageOf} from '../../errors.js'
import {HOST_MIGRATIONS} from './migrations.js'

/** Held by this module alone: nothing else can construct a WriteTx. */
const issuing = Symbol('write transaction')
/** The transactions whose work is running now; a WriteTx kept past its work is refused. */
const openTransactions = new WeakSet<WriteTx>()

/** Proof of an open IMMEDIATE transaction, and the only way to run a statement that writes. */
export class WriteTx {
  readonly #statement: (sql: string) => Database.Statement

  constructor(key: typeof issuing, statement: (sql: string) => Database.Statement) {
    if (key !== issuing) throw new Error('only HostDatabase.write begins a write transaction')
    this.#statement = statement
  }

  run(sql: string, ...params: unknown[]): Database.RunResult {
    if (!openTransactions.has(this)) throw new Error('a write transaction was used after it ended')
    return this.#statement(sql).run(...params)
  }

  /** Inserts `row`, or on a conflict over `keys` overwrites every column of it but the keys and `insertOnly`. */
  upsert(table: string, keys: readonly string[], row: Record<string, unknown>, insertOnly: readonly string[] = []): Database.RunResult {
    const columns = Object.keys(row)
    const overwritten = columns.filter((column) => !keys.includes(column) && !insertOnly.includes(column))
    return this.run(
      `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map((column) => `@${column}`).join(', ')})
       ON CONFLICT (${keys.join(', ')}) DO UPDATE SET ${overwritten.map((column) => `${column} = excluded.${column}`).join(', ')}`,
      row,
    )
  }
}

export class HostDatabase {
  private readonly statements = new Map<string, Database.Statement>()
  private readonly writeListeners: Array<() => void> = []

  private constructor(private readonly db: Database.Database) {}

  /** Opens `file` and applies the migrations it lacks; a file written by a newer build is refused. */
  static open(file: string): HostDatabase {
    const db = new Database(file)
    try {
      db.pragma('journal_mode = WAL')
      db.pragma('synchronous = FULL')
      db.pragma('busy_timeout = 5000')
      db.pragma('foreign_keys = ON')
      migrate(db, file)
    } catch (error) {
      db.close()
      throw error
    }
    return new HostDatabase(db)
  }

  /**
   * Runs `work` on a copy of the state outside the live file (a snapshot being staged): in one
   * transaction, and self-contained afterwards (rollback journal, no WAL beside it).
   */
  static amendCopy(file: string, work: (tx: WriteTx) => void): void {
    const copy = new HostDatabase(new Database(file))
    try {
      copy.db.pragma('journal_mode = DELETE')
      copy.write(work)
    } finally {
      copy.close()
    }
  }

  close(): void {
    this.db.close()
  }

  /** A consistent copy in `file`, through SQLite's online backup (writers keep going). */
  async backupTo(file: string): Promise<void> {
    await this.db.backup(file)
  }

  /** One row of a read, typed as the columns the SQL selects. */
  one<Row>(sql: string, ...params: unknown[]): Row | undefined {
    return this.reader<Row>(sql).get(...params)
  }

  all<Row>(sql: string, ...params: unknown[]): Row[] {
    return this.reader<Row>(sql).all(...params)
  }

  /** One IMMEDIATE transaction; listeners of `onWrite` run after it, committed or not. */
  write<T>(work: (tx: WriteTx) => T): T {
    const tx = new WriteTx(issuing, (sql) => this.writer(sql))
    openTransactions.add(tx)
    try {
      return this.db.transaction(() => work(tx)).immediate()
    } finally {
      openTransactions.delete(tx)
      for (const listener of this.writeListeners) listener()
    }
  }

  /** Called after every write transaction (caches of what a write may change start over). */
  onWrite(listener: () => void): void {
    this.writeListeners.push(listener)
  }

  private writer(sql: string): Database.Statement {
    const statement = this.statement(sql)
    if (statement.reader) throw new Error(`a write transaction ran a read: ${sql}`)
    return statement
  }

  private reader<Row>(sql: string): Database.Statement<unknown[], Row> {
    const statement = this.statement(sql)
    if (!statement.reader) throw new Error(`a write outside a write transaction: ${sql}`)
    // The one place a row type is attached: the SQL beside each call names the columns.
    return statement as Database.Statement<unknown[], Row>
  }

  /** Prepared statements are cached: the data plane reads a route on every request. */
  private statement(sql: string): Database.Statement {
    let statement = this.statements.get(sql)
    if (!statement) {
      statement = this.db.prepare(sql)
      this.statements.set(sql, statement)
    }
    return statement
  }
}

function userVersion(db: Database.Database): number {
  return db.prepare<[], number>('PRAGMA user_version').pluck().get()!
}

/**
 * Brings the file to the newest schema one step at a time, each step and its new `user_version` in
 * one transaction: a process killed mid-step leaves the file at the version before it. The version
 * is read again inside the transaction, so a second process opening the file at once (`host
 * pairing-code` beside a running host) applies nothing twice.
 */
function migrate(db: Database.Database, file: string): void {
  const latest = HOST_MIGRATIONS.length
  for (;;) {
    const applied = db
      .transaction(() => {
        const version = userVersion(db)
        if (version > latest) {
          throw new KitError('schema_mismatch', `${file} has host state schema version ${version}, newer than this build's ${latest}; upgrade edgeworkers`)
        }
        const step = HOST_MIGRATIONS[version]
        if (!step) return false
        try {
          db.exec(step.sql)
        } catch (error) {
          throw new KitError('store_unavailable', `${file}: host state migration to version ${version + 1} (${step.name}) failed: ${messageOf(error)}`)
        }
        db.pragma(`user_version = ${version + 1}`)
        return true
      })
      .immediate()
    if (!applied) return
  }
}
