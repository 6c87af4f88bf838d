// The first schema. A migration is frozen once released: it spells out its own literals instead of
// importing constants that may change, and takes Kysely<any> because it describes a past schema.
import {sql, type Kysely} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('companies')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute()

  await db.schema
    .createTable('departments')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('company_id', 'text', (c) => c.notNull().references('companies.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('deleted_at', 'bigint')
    .execute()
  await db.schema.createIndex('departments_company').on('departments').column('company_id').execute()

  await db.schema
    .createTable('service_accounts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('department_id', 'text', (c) => c.notNull().references('departments.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('deleted_at', 'bigint')
    .execute()
  // A name is unique among a department's live accounts; a soft-deleted one frees its name.
  await db.schema
    .createIndex('service_accounts_live_name')
    .on('service_accounts')
    .columns(['department_id', 'name'])
    .unique()
    .where(sql.ref('deleted_at'), 'is', null)
    .execute()

  await db.schema
    .createTable('edge_workers')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('company_id', 'text', (c) => c.notNull().references('companies.id').onDelete('cascade'))
    .addColumn('department_id', 'text', (c) => c.notNull().unique().references('departments.id').onDelete('cascade'))
    .addColumn('script_name', 'text', (c) => c.notNull().unique())
    .addColumn('status', 'text', (c) => c.notNull())
    // No foreign key: versions already reference their Worker, and a cycle would complicate cascades.
    .addColumn('current_version_id', 'text')
    .addColumn('serving_scope', 'text')
    .addColumn('base_revision', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('retired_at', 'bigint')
    .execute()
  await db.schema.createIndex('edge_workers_company_status').on('edge_workers').columns(['company_id', 'status']).execute()

  await db.schema
    .createTable('edge_worker_versions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('worker_id', 'text', (c) => c.notNull().references('edge_workers.id').onDelete('cascade'))
    .addColumn('release_generation', 'text', (c) => c.notNull())
    .addColumn('builder_policy', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('project_artifact_key', 'text', (c) => c.notNull())
    .addColumn('project_digest', 'text', (c) => c.notNull())
    .addColumn('bundle_artifact_key', 'text', (c) => c.notNull())
    .addColumn('bundle_digest', 'text', (c) => c.notNull())
    .addColumn('manifest', 'text', (c) => c.notNull())
    .addColumn('receipt', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addCheckConstraint('edge_worker_versions_state_check', sql`state in ('built', 'deploying', 'deployed', 'failed', 'uncertain', 'superseded')`)
    .execute()
  await db.schema.createIndex('edge_worker_versions_worker_state').on('edge_worker_versions').columns(['worker_id', 'state']).execute()
  // Artifact cleanup checks whether any version still references an object key.
  await db.schema.createIndex('edge_worker_versions_project_key').on('edge_worker_versions').column('project_artifact_key').execute()
  await db.schema.createIndex('edge_worker_versions_bundle_key').on('edge_worker_versions').column('bundle_artifact_key').execute()

  await db.schema
    .createTable('edge_worker_outbox')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('operation', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('dedupe_key', 'text', (c) => c.notNull().unique())
    // Deliberately no foreign keys: these rows outlive a company hard delete.
    .addColumn('company_id', 'text')
    .addColumn('department_id', 'text')
    .addColumn('worker_id', 'text')
    .addColumn('version_id', 'text')
    .addColumn('script_name', 'text')
    .addColumn('dispatch_namespace', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('lease_owner', 'text')
    .addColumn('lease_token', 'text')
    .addColumn('lease_expires_at', 'bigint')
    .addColumn('next_attempt_at', 'bigint')
    .addColumn('last_error_code', 'text')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addCheckConstraint('edge_worker_outbox_operation_check', sql`operation in ('deploy', 'artifact_cleanup', 'control_audit')`)
    .addCheckConstraint('edge_worker_outbox_status_check', sql`status in ('pending', 'leased', 'completed', 'failed', 'uncertain', 'cancelled')`)
    .execute()
  // Due pending rows, per lane and scope, oldest due first (claims, recovery republisher).
  await db.schema
    .createIndex('edge_worker_outbox_due')
    .on('edge_worker_outbox')
    .columns(['operation', 'dispatch_namespace', 'status', 'next_attempt_at', 'created_at'])
    .execute()
  // Expired leases (claims reclaim them; recovery finds stalled work).
  await db.schema.createIndex('edge_worker_outbox_lease_expiry').on('edge_worker_outbox').columns(['status', 'lease_expires_at']).execute()
  // Deferred rows (last_error_code = edge_host_fenced) and operator filters by error code.
  await db.schema.createIndex('edge_worker_outbox_error_code').on('edge_worker_outbox').columns(['last_error_code', 'status', 'next_attempt_at']).execute()
  await db.schema.createIndex('edge_worker_outbox_worker').on('edge_worker_outbox').columns(['worker_id', 'created_at']).execute()
  await db.schema.createIndex('edge_worker_outbox_created').on('edge_worker_outbox').column('created_at').execute()

  await db.schema
    .createTable('edge_worker_audit_logs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('resource_type', 'text', (c) => c.notNull())
    .addColumn('resource_id', 'text', (c) => c.notNull())
    .addColumn('actor_type', 'text', (c) => c.notNull())
    .addColumn('actor_id', 'text', (c) => c.notNull())
    .addColumn('auth_method', 'text', (c) => c.notNull())
    .addColumn('result', 'text', (c) => c.notNull())
    .addColumn('reason_code', 'text')
    .addColumn('digest', 'text')
    .addColumn('facts', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('edge_worker_audit_logs_resource').on('edge_worker_audit_logs').columns(['resource_type', 'resource_id', 'created_at']).execute()
  await db.schema.createIndex('edge_worker_audit_logs_action').on('edge_worker_audit_logs').columns(['action', 'created_at']).execute()
  await db.schema.createIndex('edge_worker_audit_logs_created').on('edge_worker_audit_logs').column('created_at').execute()

  await db.schema
    .createTable('kit_pairings')
    .addColumn('scope', 'text', (c) => c.primaryKey())
    .addColumn('host_url', 'text', (c) => c.notNull())
    .addColumn('host_fingerprint', 'text', (c) => c.notNull())
    .addColumn('host_public_key', 'text', (c) => c.notNull())
    .addColumn('shared_secret', 'text', (c) => c.notNull())
    .addColumn('paired_at', 'bigint', (c) => c.notNull())
    .addColumn('unpaired_at', 'bigint')
    .execute()

  await db.schema
    .createTable('kit_fences')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('ttl_seconds', 'integer', (c) => c.notNull())
    .addColumn('began_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('host_acked_at', 'bigint')
    .addColumn('ended_at', 'bigint')
    .addColumn('end_reason', 'text')
    .execute()
  await db.schema.createIndex('kit_fences_scope_open').on('kit_fences').columns(['scope', 'ended_at', 'began_at']).execute()

  await db.schema
    .createTable('kit_gates')
    .addColumn('scope', 'text', (c) => c.primaryKey())
    .addColumn('maintenance', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('restore_pending', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('reasons', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute()
}
