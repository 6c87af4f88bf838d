// What every repository method runs against: a Kysely handle (the pool, or one open transaction),
// the backend and the clock. The two helpers below are the only places that
// decide when a transaction is opened.
import type {Insertable, Kysely, Selectable} from 'kysely'
import type {Database} from './schema.js'

/** The tables whose rows a transaction locks by their `id`. */
type LockableTable = 'companies' | 'departments' | 'edge_workers' | 'edge_worker_versions' | 'edge_worker_outbox'

export type Backend = 'sqlite' | 'postgres'

/** Epoch milliseconds. Injected so tests can move time; every timestamp the store writes comes from here. */
export interface Clock {
  now(): number
}

export const systemClock: Clock = {now: () => Date.now()}

export interface StoreEnv {
  backend: Backend
  clock: Clock
}

export class StoreContext {
  constructor(
    readonly db: Kysely<Database>,
    readonly env: StoreEnv,
    private readonly inTransaction: boolean,
  ) {}

  now(): number {
    return this.env.clock.now()
  }

  /** Row locks (`FOR UPDATE`) exist on PostgreSQL; on SQLite the BEGIN IMMEDIATE write lock covers them. */
  get locksRows(): boolean {
    return this.env.backend === 'postgres'
  }

  /** The row of `table` with this id, locked until the transaction ends (see locksRows). */
  lockRow<T extends LockableTable>(table: T, id: string): Promise<Selectable<Database[T]> | undefined> {
    // Every lockable table has a text `id`: the one table the builder is typed for stands for each.
    const query = this.db
      .selectFrom(table as 'edge_workers')
      .selectAll()
      .where('id', '=', id)
    return (this.locksRows ? query.forUpdate() : query).executeTakeFirst() as Promise<Selectable<Database[T]> | undefined>
  }

  /**
   * Inserts `row` unless a row with one of its unique keys exists; false when one did. The unique
   * index decides, so of concurrent inserts of one key exactly one is true.
   */
  async insertNew<T extends keyof Database>(table: T, row: Insertable<Database[T]>): Promise<boolean> {
    // Typed for one table, as every table's row is the table's own.
    const inserted = await this.db
      .insertInto(table as 'kit_gates')
      .values(row as Insertable<Database['kit_gates']>)
      .onConflict((oc) => oc.doNothing())
      .executeTakeFirst()
    return inserted.numInsertedOrUpdatedRows !== 0n
  }

  /**
   * Runs several statements as one unit: inside the caller's transaction, or in a new one. A new
   * one that PostgreSQL aborts as a deadlock victim or serialization failure is run again (see
   * retryingConflicts); a nested one is retried with its outermost transaction.
   */
  async atomic<T>(work: (ctx: StoreContext) => Promise<T>): Promise<T> {
    if (this.inTransaction) return work(this)
    return retryingConflicts(() => this.db.transaction().execute((trx) => work(new StoreContext(trx, this.env, true))))
  }

  /**
   * Runs one write statement. On PostgreSQL a single statement is already atomic, so it runs as is
   * (one round trip). On SQLite it still goes through BEGIN IMMEDIATE: a write that starts as a
   * reader could fail with SQLITE_BUSY_SNAPSHOT when another process commits first.
   */
  async write<T>(work: (ctx: StoreContext) => Promise<T>): Promise<T> {
    if (this.env.backend !== 'postgres') return this.atomic(work)
    return this.inTransaction ? work(this) : retryingConflicts(() => work(this))
  }
}

/** PostgreSQL's deadlock_detected and serialization_failure: the whole transaction was rolled back. */
const CONFLICT_CODES = new Set(['40P01', '40001'])
const CONFLICT_ATTEMPTS = 5

export function isTransientConflict(error: unknown): boolean {
  return CONFLICT_CODES.has(String((error as {code?: unknown} | null)?.code))
}

/**
 * Runs a transaction again when PostgreSQL rolled it back as a conflict: nothing of it was applied,
 * so running it again is safe, and a lane retries the row rather than losing its batch. Every
 * transaction takes its locks in one order (outbox → worker → version), so this is a safety net,
 * not the way deadlocks are avoided.
 */
async function retryingConflicts<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run()
    } catch (error) {
      if (!isTransientConflict(error) || attempt >= CONFLICT_ATTEMPTS) throw error
      await new Promise((resolve) => setTimeout(resolve, 10 * attempt + Math.random() * 40))
    }
  }
}
