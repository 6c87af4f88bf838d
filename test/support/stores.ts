// Runs a suite against every store backend: a SQLite file and a real PostgreSQL database (the server
// from ./global-setup.ts). Each describeEachStore block gets its own migrated database; rows are
// wiped and the clock reset before every test, so tests never see each other's data.
//
//   describeEachStore('my lane', (t) => {
//     test('does a thing', async () => {
//       await t.store.outbox.enqueue({...})
//       t.clock.advance(90_000)
//       ...
//     })
//   })
import {randomBytes} from 'node:crypto'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import pg from 'pg'
import {afterAll, beforeAll, beforeEach, describe, inject} from 'vitest'
import type {z} from 'zod'
import {settingsSchema, type Settings} from '../../src/config/schema.js'
import {openStore, type Backend, type Clock, type Store} from '../../src/store/index.js'

export const BACKENDS: readonly Backend[] = ['sqlite', 'postgres']

/** What a config file may hold: every section and key optional. */
export type SettingsInput = z.input<typeof settingsSchema>

/** A clock tests move by hand. Starts at 2026-01-01T00:00:00Z. */
export class TestClock implements Clock {
  static readonly START = Date.UTC(2026, 0, 1)
  private ms = TestClock.START

  now(): number {
    return this.ms
  }

  advance(ms: number): void {
    this.ms += ms
  }

  reset(): void {
    this.ms = TestClock.START
  }
}

/**
 * The wall clock, moved on by hand: for stores whose other users (child processes, the host) run on
 * the wall clock, so that a lease they took runs out without the test waiting for it.
 */
export class AdvancedWallClock implements Clock {
  constructor(private aheadMs = 0) {}

  now(): number {
    return Date.now() + this.aheadMs
  }

  advance(ms: number): void {
    this.aheadMs += ms
  }
}

export interface StoreHarness {
  readonly backend: Backend
  /** Migrated; emptied before each test. */
  readonly store: Store
  readonly clock: TestClock
  /** `store.url` of this database, for other connections and child processes. */
  readonly url: string
  /** Settings pointing at this database (unless `store.url` is overridden), with any section overridden. */
  settings(overrides?: SettingsInput): Settings
  /** Another connection to this database; closed when the block ends. */
  open(settings?: Settings): Promise<Store>
  /** The URL of a new, empty (unmigrated) database of the same backend. */
  freshUrl(): Promise<string>
  /** Runs raw SQL on this database, or on `url` (to set up states the store API refuses to create). */
  exec(statement: string, url?: string): Promise<void>
}

export function describeEachStore(name: string, body: (t: StoreHarness) => void): void {
  for (const backend of BACKENDS) describeStore(backend, name, body)
}

/** One backend only: for suites whose subject (the host, the runtime) does not differ by store. */
export function describeStore(backend: Backend, name: string, body: (t: StoreHarness) => void): void {
  describe(`${name} [${backend}]`, () => {
    const harness = new Harness(backend)
    beforeAll(() => harness.setUp())
    beforeEach(() => harness.reset())
    afterAll(() => harness.tearDown())
    body(harness)
  })
}

class Harness implements StoreHarness {
  readonly clock = new TestClock()
  url = ''
  private opened: Store[] = []
  private readonly dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-store-'))
  private readonly databases: string[] = []
  private current?: Store
  /** Kept open for the block: resets run before every test. */
  private raw?: {sqlite: Database.Database} | {postgres: pg.Client}

  constructor(readonly backend: Backend) {}

  get store(): Store {
    if (!this.current) throw new Error('the store is opened in beforeAll; use t.store inside a test')
    return this.current
  }

  settings(overrides: SettingsInput = {}): Settings {
    return settingsSchema.parse({data_dir: this.dataDir, ...overrides, store: {url: this.url, ...overrides.store}})
  }

  async open(settings = this.settings()): Promise<Store> {
    const store = await openStore(settings, {clock: this.clock})
    this.opened.push(store)
    return store
  }

  async freshUrl(): Promise<string> {
    if (this.backend === 'sqlite') return path.join(this.dataDir, `fresh-${randomBytes(4).toString('hex')}.sqlite`)
    const name = `ew_test_${randomBytes(6).toString('hex')}`
    await withAdmin((client) => client.query(`create database ${name}`))
    this.databases.push(name)
    const url = new URL(inject('pgAdminUrl'))
    url.pathname = `/${name}`
    return url.toString()
  }

  async setUp(): Promise<void> {
    this.url = await this.freshUrl()
    this.current = await this.open()
    await this.current.migrate()
    if (this.backend === 'sqlite') {
      this.raw = {sqlite: new Database(this.url, {timeout: 10_000})}
    } else {
      const client = new pg.Client({connectionString: this.url})
      await client.connect()
      this.raw = {postgres: client}
    }
  }

  async reset(): Promise<void> {
    this.clock.reset()
    const tables = (
      await this.query<{name: string}>(
        this.backend === 'sqlite'
          ? `select name from sqlite_master where type = 'table' and name not like 'sqlite_%' and name not like 'kysely_%'`
          : `select tablename as name from pg_tables where schemaname = 'public' and tablename not like 'kysely_%'`,
      )
    ).map((row) => row.name)
    // DELETE, not TRUNCATE: on a handful of rows it is much cheaper on PostgreSQL.
    await this.exec(`begin; ${tables.map((table) => `delete from ${table};`).join(' ')} commit;`)
  }

  async tearDown(): Promise<void> {
    if (this.raw && 'sqlite' in this.raw) this.raw.sqlite.close()
    if (this.raw && 'postgres' in this.raw) await this.raw.postgres.end()
    await Promise.all(this.opened.map((store) => store.close()))
    this.opened = []
    for (const name of this.databases) await withAdmin((client) => client.query(`drop database if exists ${name} with (force)`))
    rmSync(this.dataDir, {recursive: true, force: true})
  }

  async exec(statement: string, url = this.url): Promise<void> {
    if (url === this.url && this.raw) {
      if ('sqlite' in this.raw) this.raw.sqlite.exec(statement)
      else await this.raw.postgres.query(statement)
    } else if (this.backend === 'sqlite') {
      const db = new Database(url, {timeout: 10_000})
      try {
        db.exec(statement)
      } finally {
        db.close()
      }
    } else {
      await withClient(url, (client) => client.query(statement))
    }
  }

  private async query<T>(statement: string): Promise<T[]> {
    if (!this.raw) throw new Error('the harness is not set up')
    if ('sqlite' in this.raw) return this.raw.sqlite.prepare(statement).all() as T[]
    return (await this.raw.postgres.query(statement)).rows as T[]
  }
}

async function withAdmin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  return withClient(inject('pgAdminUrl'), work)
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({connectionString: url})
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}
