// Owner hosts of stateful Workers (issue #36, docs/many-hosts.md): a Worker with Durable Objects,
// KV/D1/R2/queue data or cron triggers is served by one host of its kit at a time, the one this
// table names. `moving_to` is set while `worker move` copies its data to another host; the owner
// switches only once the copy serves there, in one update; `released_from` names the old owner
// until its copy is dropped.
import type {Kysely} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('kit_worker_owners')
    // Script names are never reused: one owner row per Worker, for good.
    .addColumn('script_name', 'text', (c) => c.primaryKey())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('host_scope', 'text', (c) => c.notNull())
    .addColumn('moving_to', 'text')
    .addColumn('move_started_at', 'bigint')
    // The previous owner until its copy of the data is dropped (the move's last step).
    .addColumn('released_from', 'text')
    .addColumn('claimed_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('kit_worker_owners_scope').on('kit_worker_owners').columns(['scope', 'host_scope']).execute()
}
