// `edgeworkers d1 execute` and `d1 migrations apply`: SQL on one of a Worker's D1 databases, named by
// the Worker's binding, run by the edge host in one transaction (all of it or none). Migrations are
// wrangler's: the `.sql` files of a directory in name order (0001_init.sql, …), each applied with its
// record in the migrations table (wrangler's `d1_migrations`) in one transaction, so a migration is
// applied exactly once and a failed one leaves nothing behind.
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {KitError} from '../errors.js'
import type {D1QueryRequest, D1QueryResult} from '../protocol/api/d1.js'
import {identifierSchema} from '../protocol/api/common.js'
import {ProviderError} from '../provider/types.js'
import type {Engine} from './context.js'
import {requireProvider} from './provider.js'
import {workerReadError} from './worker-reads.js'
import {findWorker} from './workers.js'

export const DEFAULT_MIGRATIONS_DIR = 'migrations'
export const DEFAULT_MIGRATIONS_TABLE = 'd1_migrations'

export interface D1Execution {
  department: string
  binding: string
  results: D1QueryResult['results']
}

export interface D1MigrationsApplied {
  department: string
  binding: string
  dir: string
  /** The migrations applied now, in order (file names). */
  applied: string[]
  /** Those that were applied before. */
  alreadyApplied: string[]
}

/** Runs the SQL (one or more statements) on the Worker's database; several statements answer the last one's rows. */
export async function executeD1(engine: Engine, handle: string, binding: string, source: {command: string} | {file: string}): Promise<D1Execution> {
  const sql = 'command' in source ? source.command : await readSqlFile(source.file)
  if (sql.trim() === '') throw new KitError('usage', 'the SQL is empty')
  const send = await d1Sender(engine, handle, binding)
  const {results} = await send([{sql}])
  return {department: handle, binding, results}
}

/**
 * Applies the pending migrations. Without `dir` / `table`, they are the binding's `migrations_dir`
 * (relative to `projectDir`, the current directory by default) and `migrations_table` in the
 * Worker's deployed config, else wrangler's defaults.
 */
export async function applyD1Migrations(
  engine: Engine,
  handle: string,
  binding: string,
  given: {dir?: string | undefined; table?: string | undefined; projectDir?: string | undefined},
): Promise<D1MigrationsApplied> {
  const configured = given.dir === undefined || given.table === undefined ? await deployedMigrationSettings(engine, handle, binding) : {}
  const options = {
    dir: given.dir ?? path.join(given.projectDir ?? '.', configured.migrationsDir ?? DEFAULT_MIGRATIONS_DIR),
    table: given.table ?? configured.migrationsTable ?? DEFAULT_MIGRATIONS_TABLE,
  }
  if (!identifierSchema.safeParse(options.table).success)
    throw new KitError('usage', `the migrations table ${JSON.stringify(options.table)} must be an identifier`)
  const files = await migrationFiles(options.dir)
  const send = await d1Sender(engine, handle, binding)
  const table = `"${options.table}"`
  const recorded = await send([
    {
      sql: `CREATE TABLE IF NOT EXISTS ${table} (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL)`,
    },
    {sql: `SELECT name FROM ${table} ORDER BY id`},
  ])
  const done = new Set(recorded.results[1]!.rows.map((row) => String(row[0])))
  const applied: string[] = []
  for (const file of files.filter((name) => !done.has(name))) {
    const sql = await readFile(path.join(options.dir, file), 'utf8')
    try {
      await send([{sql}, {sql: `INSERT INTO ${table} (name) VALUES (?)`, params: [file]}])
    } catch (error) {
      if (!(error instanceof KitError)) throw error
      const before = applied.length === 0 ? 'none applied before it' : `applied before it: ${applied.join(', ')}`
      throw new KitError(error.code, `migration ${file} failed, nothing of it applied (${before}): ${error.message}`)
    }
    applied.push(file)
  }
  return {department: handle, binding, dir: options.dir, applied, alreadyApplied: files.filter((name) => done.has(name))}
}

/** The binding's migrationsDir / migrationsTable in the Worker's current version's manifest (either may be absent). */
async function deployedMigrationSettings(engine: Engine, handle: string, binding: string): Promise<{migrationsDir?: string; migrationsTable?: string}> {
  const worker = await findWorker(engine, handle)
  const version = worker.current_version_id === null ? undefined : await engine.store.workers.getVersion(worker.current_version_id)
  const databases = (version?.manifest as {d1Databases?: Array<{binding: string; migrationsDir?: string; migrationsTable?: string}>} | undefined)?.d1Databases
  return databases?.find((database) => database.binding === binding) ?? {}
}

async function readSqlFile(file: string): Promise<string> {
  return readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
    throw new KitError('usage', `cannot read ${file}: ${error.code ?? error.message}`)
  })
}

/** The `.sql` files of `dir`, in name order. */
async function migrationFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, {withFileTypes: true}).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') throw new KitError('usage', `the migrations directory ${dir} does not exist`)
    throw error
  })
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith('.sql'))
    .map((entry) => entry.name)
    .sort()
}

type Sender = (queries: D1QueryRequest['queries']) => Promise<D1QueryResult>

/** Sends queries to the database `binding` of the Worker `handle` names, host refusals as KitErrors. */
async function d1Sender(engine: Engine, handle: string, binding: string): Promise<Sender> {
  if (!identifierSchema.safeParse(binding).success) throw new KitError('usage', `the binding ${JSON.stringify(binding)} must be an identifier`)
  const worker = await findWorker(engine, handle)
  if (worker.retired_at !== null)
    throw new KitError('conflict', `Worker ${handle} is retired: its D1 databases stay on the host's disk, but nothing serves them`)
  const {provider} = await requireProvider(engine, `reach the D1 databases of ${handle}`)
  return async (queries) => {
    try {
      return await provider.d1Query(worker.script_name, {binding, queries})
    } catch (error) {
      if (!(error instanceof ProviderError)) throw error
      throw kitErrorOf(error, handle, binding)
    }
  }
}

function kitErrorOf(error: ProviderError, handle: string, binding: string): KitError {
  const hostMessage = error.message.replace(/^.*?edge host answered \d+ \w+: /, '')
  switch (error.code) {
    case 'edge_host_d1_error':
      return new KitError('failed', hostMessage, error.code)
    case 'edge_host_d1_database_not_found':
      return new KitError('not_found', `Worker ${handle} has no D1 database bound as ${binding}`, error.code)
    default:
      return workerReadError(error, handle)
  }
}
