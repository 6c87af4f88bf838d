// What a short id may mean: the ids of generated (UUID) rows that start with a prefix, for the
// engine's git-style id resolution (engine/id-prefix.ts).
import type {Kysely} from 'kysely'
import type {Database} from '../schema.js'

/** Tables whose ids the kit generates as UUIDs. */
type GeneratedIdTable = 'edge_worker_outbox' | 'edge_workers' | 'kit_fences'

/** Up to `limit` ids of `table` starting with `prefix` (lowercase hex and dashes only), in id order. */
export async function idsWithPrefix(db: Kysely<Database>, table: GeneratedIdTable, prefix: string, limit: number): Promise<string[]> {
  if (!/^[0-9a-f-]+$/.test(prefix)) return []
  const rows = await db.selectFrom(table).select('id').where('id', 'like', `${prefix}%`).orderBy('id').limit(limit).execute()
  return rows.map((row) => row.id)
}
