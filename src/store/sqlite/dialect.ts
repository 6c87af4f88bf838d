// Kysely's SQLite dialect (better-sqlite3) with the changes the store relies on:
// - every transaction is BEGIN IMMEDIATE: it takes the write lock up front, so two writers queue
//   instead of one failing mid-transaction with SQLITE_BUSY_SNAPSHOT;
// - migrations run in one such transaction (SQLite DDL is transactional; Kysely's adapter says
//   otherwise), so two processes migrating a fresh file apply each migration once;
// - SQLITE_BUSY never reaches a caller: the lock is waited for in short synchronous slices (the
//   connection's busy_timeout) and retried asynchronously in between — so one process never blocks
//   its own event loop for long — until the store's busy budget is spent;
// - prepared statements are cached per SQL text (the store's statements are a small fixed set).
import type BetterSqlite3 from 'better-sqlite3'
import {
  CompiledQuery,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
} from 'kysely'
import {KitError} from '../../errors.js'

const STATEMENT_CACHE_SIZE = 500

export interface ImmediateSqliteConfig {
  database: BetterSqlite3.Database
  /** Where the file is, for the one-line error when the lock budget runs out. */
  location: string
  /** Total time a statement may wait for another process's write lock (setting store.sqlite_busy_timeout_ms). */
  busyBudgetMs: number
}

export class ImmediateSqliteDialect implements Dialect {
  constructor(private readonly config: ImmediateSqliteConfig) {}

  createDriver(): Driver {
    return new ImmediateSqliteDriver(this.config)
  }

  createQueryCompiler(): SqliteQueryCompiler {
    return new SqliteQueryCompiler()
  }

  createAdapter(): SqliteAdapter {
    return new TransactionalDdlSqliteAdapter()
  }

  // biome-ignore lint/suspicious/noExplicitAny: kysely's dialect interface is schema-agnostic
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new SqliteIntrospector(db)
  }
}

class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true
  }
}

class ImmediateSqliteDriver implements Driver {
  private readonly connection: BusyRetryingConnection
  /** better-sqlite3 has one connection; callers queue for it here (a transaction holds it throughout). */
  private queue: Promise<void> = Promise.resolve()
  private releaseHeld?: () => void

  constructor(private readonly config: ImmediateSqliteConfig) {
    this.connection = new BusyRetryingConnection(config)
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    const previous = this.queue
    let release!: () => void
    this.queue = new Promise((resolve) => (release = resolve))
    await previous
    this.releaseHeld = release
    return this.connection
  }

  async releaseConnection(): Promise<void> {
    const release = this.releaseHeld
    this.releaseHeld = undefined
    release?.()
  }

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'))
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'))
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'))
  }

  async destroy(): Promise<void> {
    this.config.database.close()
  }
}

class BusyRetryingConnection implements DatabaseConnection {
  private readonly statements = new Map<string, BetterSqlite3.Statement>()

  constructor(private readonly config: ImmediateSqliteConfig) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const deadline = Date.now() + this.config.busyBudgetMs
    for (let attempt = 0; ; attempt++) {
      try {
        return this.run<R>(query)
      } catch (error) {
        if (!isBusy(error)) throw error
        // A busy statement did nothing (SQLite statements are atomic; BEGIN/COMMIT can be repeated).
        if (Date.now() >= deadline) {
          throw new KitError(
            'store_unavailable',
            `SQLite store ${this.config.location} stayed locked by another writer for more than ${this.config.busyBudgetMs} ms (store.sqlite_busy_timeout_ms)`,
          )
        }
        await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * Math.min(10, 2 ** attempt)))
      }
    }
  }

  // biome-ignore lint/correctness/useYield: kysely requires the method; the store never streams
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming is not used by the store')
  }

  private prepared(text: string): BetterSqlite3.Statement {
    let statement = this.statements.get(text)
    if (!statement) {
      statement = this.config.database.prepare(text)
      if (this.statements.size >= STATEMENT_CACHE_SIZE) this.statements.delete(this.statements.keys().next().value!)
      this.statements.set(text, statement)
    }
    return statement
  }

  private run<R>(query: CompiledQuery): QueryResult<R> {
    const statement = this.prepared(query.sql)
    const parameters = query.parameters as unknown[]
    if (statement.reader) return {rows: statement.all(parameters) as R[]}
    const {changes} = statement.run(parameters)
    return {numAffectedRows: BigInt(changes), rows: []}
  }
}

function isBusy(error: unknown): boolean {
  return typeof (error as {code?: unknown}).code === 'string' && (error as {code: string}).code.startsWith('SQLITE_BUSY')
}
