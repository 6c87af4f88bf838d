// The outbox state machine made explicit in its columns (../outbox-states.ts): a `deferred` status
// instead of a pending deploy whose last_error_code is `edge_host_fenced`, and separate columns for a
// sweep's claim stamp (claimed_by, claim_expires_at) and an enqueuer's reservation (reserved_by), so
// that lease_owner means only the task's lease and next_attempt_at only "due at".
//
// Rows are converted by the rules the sweeps applied to the old encoding:
// - a pending deploy carrying `edge_host_fenced` is deferred (the code stays: operators see why);
// - a row with a lease_owner and a next_attempt_at later than its last write carries a sweep's stamp
//   (owner, cooldown deadline): it becomes the claim — on an expired lease only when the stamp is
//   later than the expiry (a live lease's next_attempt_at is what its claim left there);
// - a pending row with a lease_owner that was never attempted is its enqueuer's (or its stamping
//   sweep's) reservation, held for the dispatch grace since enqueue: reserved_by, and no lease owner.
// SQLite cannot change a CHECK constraint in place, so there the table is rebuilt (one transaction).
import {sql, SqliteAdapter, type Kysely} from 'kysely'

const STATUSES = sql`status in ('pending', 'deferred', 'leased', 'completed', 'failed', 'uncertain', 'cancelled')`

export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) await rebuildOnSqlite(db)
  else {
    await sql`alter table edge_worker_outbox
      add column claimed_by text, add column claim_expires_at bigint, add column reserved_by text,
      drop constraint edge_worker_outbox_status_check,
      add constraint edge_worker_outbox_status_check check (${STATUSES})`.execute(db)
  }
  await sql`update edge_worker_outbox set status = 'deferred'
    where status = 'pending' and operation = 'deploy' and last_error_code = 'edge_host_fenced'`.execute(db)
  await sql`update edge_worker_outbox set claimed_by = lease_owner, claim_expires_at = next_attempt_at
    where lease_owner is not null and next_attempt_at > updated_at
      and (status in ('pending', 'deferred', 'completed') or (status = 'leased' and next_attempt_at > lease_expires_at))`.execute(db)
  await sql`update edge_worker_outbox set reserved_by = lease_owner, lease_owner = null
    where status in ('pending', 'deferred') and lease_owner is not null and attempts = 0`.execute(db)
}

const COLUMNS = `id, operation, status, dedupe_key, company_id, department_id, worker_id, version_id, script_name,
  dispatch_namespace, payload, attempts, lease_owner, lease_token, lease_expires_at, next_attempt_at,
  last_error_code, last_error, created_at, updated_at`

async function rebuildOnSqlite(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('edge_worker_outbox_0004')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('operation', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('dedupe_key', 'text', (c) => c.notNull().unique())
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
    .addColumn('claimed_by', 'text')
    .addColumn('claim_expires_at', 'bigint')
    .addColumn('reserved_by', 'text')
    .addCheckConstraint('edge_worker_outbox_operation_check', sql`operation in ('deploy', 'artifact_cleanup', 'control_audit')`)
    .addCheckConstraint('edge_worker_outbox_status_check', STATUSES)
    .execute()
  await sql`insert into edge_worker_outbox_0004 (${sql.raw(COLUMNS)}) select ${sql.raw(COLUMNS)} from edge_worker_outbox`.execute(db)
  await db.schema.dropTable('edge_worker_outbox').execute()
  await db.schema.alterTable('edge_worker_outbox_0004').renameTo('edge_worker_outbox').execute()
  // The indexes of 0001 and 0003, as they were (dropping the old table dropped them).
  await db.schema
    .createIndex('edge_worker_outbox_due')
    .on('edge_worker_outbox')
    .columns(['operation', 'dispatch_namespace', 'status', 'next_attempt_at', 'created_at'])
    .execute()
  await db.schema.createIndex('edge_worker_outbox_lease_expiry').on('edge_worker_outbox').columns(['status', 'lease_expires_at']).execute()
  await db.schema.createIndex('edge_worker_outbox_error_code').on('edge_worker_outbox').columns(['last_error_code', 'status', 'next_attempt_at']).execute()
  await db.schema.createIndex('edge_worker_outbox_worker').on('edge_worker_outbox').columns(['worker_id', 'created_at']).execute()
  await db.schema.createIndex('edge_worker_outbox_created').on('edge_worker_outbox').column('created_at').execute()
  await db.schema
    .createIndex('edge_worker_outbox_scope_status')
    .on('edge_worker_outbox')
    .columns(['dispatch_namespace', 'status', 'operation', 'updated_at', 'last_error_code', 'lease_expires_at'])
    .execute()
  await db.schema
    .createIndex('edge_worker_outbox_scope_deploys')
    .on('edge_worker_outbox')
    .columns(['dispatch_namespace', 'company_id', 'created_at', 'worker_id', 'department_id', 'status', 'updated_at'])
    .where(sql.ref('operation'), '=', sql.lit('deploy'))
    .execute()
}
