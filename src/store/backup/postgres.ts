// Backup and restore of the PostgreSQL store (see ./index.ts for why rows, not pg_dump). The table
// list, primary keys and foreign keys come from the catalog of the current schema, so a table a
// later migration adds is dumped and restored without changes here.
import {once} from 'node:events'
import {createReadStream, createWriteStream} from 'node:fs'
import path from 'node:path'
import {createInterface} from 'node:readline'
import {finished} from 'node:stream/promises'
import {sql, type Kysely} from 'kysely'
import type {Settings} from '../../config/schema.js'
import {KitError} from '../../errors.js'
import {StoreContext, systemClock} from '../context.js'
import {repositoriesFor} from '../index.js'
import {migrate, schemaStatus} from '../migrator.js'
import {openPostgres} from '../postgres/open.js'
import type {Database} from '../schema.js'
import {assertDumpMatchesBuild, sameList, tableFile, type SealRestoredStore, type StoreBackup, type StoreDump, type StoreDumpInfo} from './dump.js'

/** Rows per SELECT page and per INSERT: bounded memory whatever the table size. */
const PAGE_ROWS = 500
const MIGRATION_TABLE = 'kysely_migration'
const VERSIONS_TABLE = 'edge_worker_versions'

type Row = Record<string, unknown>
// Tables are only known from the catalog at run time.
// biome-ignore lint/suspicious/noExplicitAny: a restore walks whatever tables the dump holds
type AnyDb = Kysely<any>

export class PostgresStoreBackup implements StoreBackup {
  readonly backend = 'postgres' as const

  private constructor(
    private readonly db: Kysely<Database>,
    readonly location: string,
  ) {}

  static async open(url: string, location: string, settings: Settings): Promise<PostgresStoreBackup> {
    return new PostgresStoreBackup(await openPostgres(url, settings), location)
  }

  async dump(dir: string): Promise<StoreDump> {
    return this.db
      .transaction()
      .setIsolationLevel('repeatable read')
      .setAccessMode('read only')
      .execute(async (trx) => {
        const db = trx as AnyDb
        const migrations = (await sql<{name: string}>`select name from ${sql.table(MIGRATION_TABLE)} order by name`.execute(db)).rows.map((row) => row.name)
        const tables: StoreDump['tables'] = []
        const artifactKeys = new Set<string>()
        for (const table of await tablesInRestoreOrder(db)) {
          const keyColumns = await primaryKeyOf(db, table)
          const output = createWriteStream(path.join(dir, tableFile(table)), {flags: 'wx', mode: 0o600})
          let rows = 0
          let last: Row | undefined
          for (;;) {
            const after = last
              ? sql`where (${sql.join(keyColumns.map((column) => sql.ref(column)))}) > (${sql.join(keyColumns.map((column) => last![column]))})`
              : sql``
            const page = (
              await sql<Row>`select * from ${sql.table(table)} ${after} order by ${sql.join(keyColumns.map((column) => sql.ref(column)))} limit ${PAGE_ROWS}`.execute(
                db,
              )
            ).rows
            for (const row of page) {
              if (!output.write(`${rowLine(table, row)}\n`)) await once(output, 'drain')
              if (table === VERSIONS_TABLE) {
                artifactKeys.add(String(row.project_artifact_key))
                artifactKeys.add(String(row.bundle_artifact_key))
              }
            }
            rows += page.length
            last = page.at(-1)
            if (page.length < PAGE_ROWS) break
          }
          output.end()
          await finished(output)
          tables.push({name: table, rows})
        }
        return {backend: 'postgres' as const, migrations, tables, artifactKeys: [...artifactKeys].sort()}
      })
  }

  async checkRestorable(dump: StoreDumpInfo): Promise<void> {
    assertDumpMatchesBuild(dump)
    const {applied} = await schemaStatus(this.db)
    // An empty database is migrated by the restore; one at another schema is not ours to change.
    if (applied.length > 0 && !sameList(applied, dump.migrations)) {
      throw new KitError(
        'schema_mismatch',
        `PostgreSQL store ${this.location} is at schema [${applied.join(', ')}], the backup at [${dump.migrations.join(', ')}]; run \`edgeworkers db migrate\` with the matching build first`,
      )
    }
  }

  async restore(dir: string, dump: StoreDumpInfo, seal: SealRestoredStore): Promise<void> {
    await this.checkRestorable(dump)
    if ((await schemaStatus(this.db)).applied.length === 0) await migrate(this.db)
    await this.db.transaction().execute(async (trx) => {
      const db = trx as AnyDb
      const present = await tablesInRestoreOrder(db)
      const dumped = dump.tables.map((table) => table.name)
      if (!sameList([...present].sort(), [...dumped].sort())) {
        throw new KitError('schema_mismatch', `PostgreSQL store ${this.location} has tables [${present.join(', ')}], the backup [${dumped.join(', ')}]`)
      }
      // One statement for all: TRUNCATE checks foreign keys against the whole set at once.
      await sql`truncate ${sql.join(present.map((table) => sql.table(table)))}`.execute(db)
      for (const table of dump.tables) {
        const inserted = await insertRows(db, table.name, path.join(dir, tableFile(table.name)))
        if (inserted !== table.rows)
          throw new KitError('usage', `the backup's ${tableFile(table.name)} holds ${inserted} rows, its manifest says ${table.rows}`)
      }
      await resetSequences(db)
      await seal(repositoriesFor(new StoreContext(trx, {backend: 'postgres', clock: systemClock}, true)))
    })
  }

  async close(): Promise<void> {
    await this.db.destroy()
  }
}

/** Our columns are text, integers and bigints (read as numbers): anything else would not survive JSON. */
function rowLine(table: string, row: Row): string {
  for (const [column, value] of Object.entries(row)) {
    if (value !== null && typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      throw new KitError('internal', `${table}.${column} holds a value JSON cannot carry; the PostgreSQL backup supports text, integer and boolean columns`)
    }
  }
  return JSON.stringify(row)
}

async function insertRows(db: AnyDb, table: string, file: string): Promise<number> {
  let batch: Row[] = []
  let count = 0
  const flush = async () => {
    if (batch.length > 0) await db.insertInto(table).values(batch).execute()
    count += batch.length
    batch = []
  }
  for await (const line of createInterface({input: createReadStream(file), crlfDelay: Infinity})) {
    if (line === '') continue
    batch.push(JSON.parse(line) as Row)
    if (batch.length >= PAGE_ROWS) await flush()
  }
  await flush()
  return count
}

/** The current schema's tables (the migrator's left out), every table after the tables it references. */
async function tablesInRestoreOrder(db: AnyDb): Promise<string[]> {
  const tables = (
    await sql<{name: string}>`select relname as name from pg_class
      where relnamespace = current_schema()::regnamespace and relkind = 'r' and relname not like 'kysely\\_%'
      order by relname`.execute(db)
  ).rows.map((row) => row.name)
  const references = (
    await sql<{child: string; parent: string}>`select child.relname as child, parent.relname as parent from pg_constraint k
      join pg_class child on child.oid = k.conrelid join pg_class parent on parent.oid = k.confrelid
      where k.contype = 'f' and child.relnamespace = current_schema()::regnamespace and child.oid <> parent.oid`.execute(db)
  ).rows
  const ordered: string[] = []
  const remaining = new Set(tables)
  while (remaining.size > 0) {
    const ready = [...remaining].filter((table) => !references.some((reference) => reference.child === table && remaining.has(reference.parent)))
    if (ready.length === 0) throw new KitError('internal', `the foreign keys between ${[...remaining].join(', ')} form a cycle`)
    for (const table of ready) {
      ordered.push(table)
      remaining.delete(table)
    }
  }
  return ordered
}

async function primaryKeyOf(db: AnyDb, table: string): Promise<string[]> {
  const columns = (
    await sql<{column: string}>`select a.attname as column from pg_index i
      join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey)
      where i.indrelid = format('%I.%I', current_schema(), ${table}::text)::regclass and i.indisprimary
      order by array_position(i.indkey::int2[], a.attnum)`.execute(db)
  ).rows.map((row) => row.column)
  if (columns.length === 0) throw new KitError('internal', `table ${table} has no primary key; the PostgreSQL backup pages by it`)
  return columns
}

/** Serial and identity columns continue after the restored rows. */
async function resetSequences(db: AnyDb): Promise<void> {
  const owned = (
    await sql<{table: string; column: string}>`select t.relname as table, a.attname as column from pg_class s
      join pg_depend d on d.objid = s.oid and d.deptype in ('a', 'i')
      join pg_class t on t.oid = d.refobjid
      join pg_attribute a on a.attrelid = t.oid and a.attnum = d.refobjsubid
      where s.relkind = 'S' and t.relnamespace = current_schema()::regnamespace`.execute(db)
  ).rows
  for (const {table, column} of owned) {
    await sql`select setval(pg_get_serial_sequence(${table}, ${column}), coalesce(max(${sql.ref(column)}), 0) + 1, false) from ${sql.table(table)}`.execute(db)
  }
}
