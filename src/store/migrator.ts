// Schema versioning. Kysely's Migrator applies the migrations (in one transaction, under an advisory
// lock on PostgreSQL, so concurrent `db migrate` runs apply each migration once); schemaStatus
// compares what the database has applied with this build's list.
import {Migrator, type Kysely} from 'kysely'
import {KitError, messageOf} from '../errors.js'
import {migrations} from './migrations/index.js'
import type {Database} from './schema.js'

const MIGRATION_TABLE = 'kysely_migration'

export interface SchemaStatus {
  matches: boolean
  /** One line naming what differs, or `none`. */
  difference: string
  applied: string[]
  /** In this build, not yet applied: `db migrate` applies them. */
  pending: string[]
  /** Applied by another (newer) build and unknown to this one. */
  unknown: string[]
}

export async function schemaStatus(db: Kysely<Database>): Promise<SchemaStatus> {
  return compareMigrations(await appliedMigrations(db))
}

/** What differs between the migrations a database applied and this build's list. */
export function compareMigrations(applied: string[]): SchemaStatus {
  const known = Object.keys(migrations).sort()
  const pending = known.filter((name) => !applied.includes(name))
  const unknown = applied.filter((name) => !known.includes(name))
  const differences = [
    pending.length > 0 ? `${pending.length} pending migration${pending.length === 1 ? '' : 's'}: ${pending.join(', ')}` : '',
    unknown.length > 0
      ? `${unknown.length} migration${unknown.length === 1 ? '' : 's'} unknown to this build (applied by a newer edgeworkers): ${unknown.join(', ')}`
      : '',
  ].filter(Boolean)
  return {matches: differences.length === 0, difference: differences.join('; ') || 'none', applied, pending, unknown}
}

/** Applies pending migrations; returns their names. Refuses a schema written by a newer build. */
export async function migrate(db: Kysely<Database>): Promise<string[]> {
  const before = await schemaStatus(db)
  if (before.unknown.length > 0) {
    throw new KitError('schema_mismatch', `store schema is newer than this build (${before.difference}); upgrade edgeworkers instead`)
  }
  const migrator = new Migrator({db, provider: {getMigrations: async () => migrations}, migrationTableName: MIGRATION_TABLE})
  const {error, results = []} = await migrator.migrateToLatest()
  if (error) {
    const failed = results.find((result) => result.status === 'Error')?.migrationName ?? 'migration'
    throw new KitError('store_unavailable', `${failed} failed: ${messageOf(error)}`)
  }
  return results.filter((result) => result.status === 'Success').map((result) => result.migrationName)
}

async function appliedMigrations(db: Kysely<Database>): Promise<string[]> {
  const tables = await db.introspection.getTables({withInternalKyselyTables: true})
  if (!tables.some((table) => table.name === MIGRATION_TABLE)) return []
  const rows = await (db as unknown as Kysely<{[MIGRATION_TABLE]: {name: string}}>).selectFrom(MIGRATION_TABLE).select('name').orderBy('name').execute()
  return rows.map((row) => row.name)
}
