// Indexes for `edgeworkers status`, so one refresh costs about the same over a million outbox rows
// as over a thousand (see StatusRepository).
import {sql, type Kysely} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  // Counts of open rows and of recently finished ones, failures grouped by error code, a group's
  // newest rows, the oldest expired lease per lane: ranges over (scope, status, operation), covered.
  await db.schema
    .createIndex('edge_worker_outbox_scope_status')
    .on('edge_worker_outbox')
    .columns(['dispatch_namespace', 'status', 'operation', 'updated_at', 'last_error_code', 'lease_expires_at'])
    .execute()
  // Deploy rows by company: the companies a scope deployed for (one seek each), and for a company
  // that is gone, its Workers and whether a deploy may still touch them — all from the index.
  await db.schema
    .createIndex('edge_worker_outbox_scope_deploys')
    .on('edge_worker_outbox')
    .columns(['dispatch_namespace', 'company_id', 'created_at', 'worker_id', 'department_id', 'status', 'updated_at'])
    .where(sql.ref('operation'), '=', sql.lit('deploy'))
    .execute()
}
