// What every repository method runs against: a Kysely handle (the pool, or one open transaction),
// the backend, the clock and the backoff settings. The two helpers below are the only places that
// decide when a transaction is opened.
import type {Kysely} from 'kysely'
import type {Settings} from '../config/schema.js'
import type {Database} from './schema.js'

export type Backend = 'sqlite' | 'postgres'

/** Epoch milliseconds. Injected so tests can move time; every timestamp the store writes comes from here. */
export interface Clock {
  now(): number
}

export const systemClock: Clock = {now: () => Date.now()}

export interface StoreEnv {
  backend: Backend
  clock: Clock
  backoff: Settings['backoff']
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

  /** Runs several statements as one unit: inside the caller's transaction, or in a new one. */
  async atomic<T>(work: (ctx: StoreContext) => Promise<T>): Promise<T> {
    if (this.inTransaction) return work(this)
    return this.db.transaction().execute((trx) => work(new StoreContext(trx, this.env, true)))
  }

  /**
   * Runs one write statement. On PostgreSQL a single statement is already atomic, so it runs as is
   * (one round trip). On SQLite it still goes through BEGIN IMMEDIATE: a write that starts as a
   * reader could fail with SQLITE_BUSY_SNAPSHOT when another process commits first.
   */
  async write<T>(work: (ctx: StoreContext) => Promise<T>): Promise<T> {
    return this.env.backend === 'postgres' ? work(this) : this.atomic(work)
  }
}
