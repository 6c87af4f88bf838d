// At most one open backup fence per scope: two `fence begin` racing on PostgreSQL (READ COMMITTED)
// would both see none open, so the store itself must refuse the second insert.
import {sql, type Kysely} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('kit_fences_one_open').on('kit_fences').column('scope').unique().where(sql.ref('ended_at'), 'is', null).execute()
}
