// The store's schema against this build's migrations: `db migrate` checks it or brings it up to date.
import type {Settings} from '../config/schema.js'
import {inspectSchema, openStore, type SchemaStatus} from '../store/index.js'

export type SchemaReport = {location: string} & SchemaStatus

/** Changes nothing: a SQLite store that does not exist is reported, not created. */
export async function checkStoreSchema(settings: Settings): Promise<SchemaReport> {
  const {location, status} = await inspectSchema(settings)
  return {location, ...status}
}

/** Applies the pending migrations, creating a SQLite store that does not exist yet. */
export async function migrateStore(settings: Settings): Promise<{location: string; applied: string[]}> {
  const store = await openStore(settings, {create: true})
  try {
    return {location: store.location, applied: await store.migrate()}
  } finally {
    await store.close()
  }
}
