// Indexes for `edgeworkers status`, so one refresh costs about the same over a million outbox rows
// as over a thousand (see StatusRepository).
import type {Kysely} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  // Counts of open rows and of recently finished ones, failures grouped by error code, and a group's
  // newest rows: ranges over (scope, status, operation), covered.
  await db.schema
    .createIndex('edge_worker_outbox_scope_status')
    .on('edge_worker_outbox')
    .columns(['dispatch_namespace', 'status', 'operation', 'updated_at', 'last_error_code'])
    .execute()
  // The companies a scope deployed for, one seek each (pending orphans are found through them).
  await db.schema
    .createIndex('edge_worker_outbox_scope_company')
    .on('edge_worker_outbox')
    .columns(['dispatch_namespace', 'operation', 'company_id', 'created_at'])
    .execute()
}
