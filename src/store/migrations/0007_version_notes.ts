// What a version says about itself (issue #34): the operator's message and tag, who deployed it, what
// it was built from (project dir, config file, env), its artifact size, the version a rollback copied
// and when its deploy completed — `versions list|show` read them and `rollback` picks its default
// target by `deployed_at`. All nullable: versions committed before this migration have none of them,
// except `deployed_at`, taken from their completed deploy rows.
import {sql, type Kysely} from 'kysely'

const COLUMNS = [
  ['message', 'text'],
  ['tag', 'text'],
  ['author', 'text'],
  ['source', 'text'],
  ['size_bytes', 'bigint'],
  ['rollback_of', 'text'],
  ['deployed_at', 'bigint'],
] as const

export async function up(db: Kysely<any>): Promise<void> {
  for (const [name, type] of COLUMNS) await db.schema.alterTable('edge_worker_versions').addColumn(name, type).execute()
  await db.schema.createIndex('edge_worker_versions_worker_tag').on('edge_worker_versions').columns(['worker_id', 'tag']).execute()
  await sql`
    update edge_worker_versions set deployed_at = (
      select max(o.updated_at) from edge_worker_outbox o
      where o.version_id = edge_worker_versions.id and o.operation = 'deploy' and o.status = 'completed'
    )`.execute(db)
}
