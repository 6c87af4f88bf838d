// Indexes that follow the work, not the history.
// - The deploy-order check (repositories/deploy-order.ts: does a newer version of the Worker have a
//   queued, running or deployed row?) runs for every claim of the deploy lanes. Without an index by
//   version it read every deploy row the Worker ever had, twice per claimed row: a claim got slower
//   with each deploy. Now it walks the Worker's newer versions only, newest first, and probes each
//   one's rows.
// - The due and lease-expiry indexes hold only rows that have a due time or a lease: settling a row
//   (both columns null) adds no entry to either, which was two of the nine index writes of a settle.
// - The error-code index served the deferred sweep before 0004 made `deferred` a status; nothing
//   reads it now, and every write of an outbox row paid for it.
import {sql, type Kysely} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('edge_worker_versions_worker_order').on('edge_worker_versions').columns(['worker_id', 'created_at', 'id']).execute()
  await db.schema
    .createIndex('edge_worker_outbox_version')
    .on('edge_worker_outbox')
    .columns(['version_id', 'status'])
    .where(sql.ref('operation'), '=', sql.lit('deploy'))
    .execute()
  await db.schema.dropIndex('edge_worker_outbox_error_code').execute()
  await db.schema.dropIndex('edge_worker_outbox_due').execute()
  await db.schema
    .createIndex('edge_worker_outbox_due')
    .on('edge_worker_outbox')
    .columns(['operation', 'dispatch_namespace', 'status', 'next_attempt_at', 'created_at'])
    .where(sql.ref('next_attempt_at'), 'is not', null)
    .execute()
  await db.schema.dropIndex('edge_worker_outbox_lease_expiry').execute()
  await db.schema
    .createIndex('edge_worker_outbox_lease_expiry')
    .on('edge_worker_outbox')
    .columns(['status', 'lease_expires_at'])
    .where(sql.ref('lease_expires_at'), 'is not', null)
    .execute()
}
