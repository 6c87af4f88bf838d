// `waits`: how many times in a row an outbox row was put back to wait — its host unreachable or
// answering 5xx, fenced, its Worker busy with another deploy — since the last attempt that failed.
// It picks the backoff step of the next wait (the engine's rule: ../../engine/retry.ts), so a row
// waiting out an outage backs off without spending attempts, which count only the times the host
// was asked. Existing rows start at 0.
//
// The waiting index holds only rows that wait and are scheduled: the status view lists them and a
// pass finds those waiting for a host without reading the rest of a backlog.
//
// A lease now ends the enqueuer's reservation itself (attempts no longer say whether a row was ever
// dispatched): rows leased before this migration lose theirs here.
import {sql, type Kysely} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('edge_worker_outbox')
    .addColumn('waits', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()
  await db.schema
    .createIndex('edge_worker_outbox_waiting')
    .on('edge_worker_outbox')
    .columns(['dispatch_namespace', 'next_attempt_at'])
    .where(sql<boolean>`waits > 0 and next_attempt_at is not null`)
    .execute()
  await sql`update edge_worker_outbox set reserved_by = null where reserved_by is not null and attempts > 0`.execute(db)
}
