// What `edgeworkers status` reads from the store on every refresh, shaped so that one refresh costs
// about the same whether the outbox holds a thousand rows or a million: every statement is an index
// seek or a range over the rows an operator cares about (migration 0003_status_indexes), never a
// scan of the history.
// - Open rows (pending, deferred, leased, failed, uncertain) are counted whole; finished ones
//   (completed, cancelled) over a recent window, since counting all of history would read every row.
// - Due work and expired leases are what the sweeps would take (the predicates of ../outbox-states.ts).
// - `scope` null means every scope (a store not paired yet).
// - A failed or uncertain row is history, not attention, once a later one of the same kind on the same
//   Worker completed: a deploy, what it tried to ship replaced by what now serves; a control command,
//   the same command on the same secret, key or account (its dedupe key's kind, controlAuditDedupeKey).
import {sql, type ExpressionBuilder, type SelectQueryBuilder} from 'kysely'
import type {StoreContext} from '../context.js'
import {
  ATTENTION_OUTBOX_STATUSES,
  type AttentionStatus,
  due,
  FINISHED_OUTBOX_STATUSES,
  leaseExpired,
  OPEN_OUTBOX_STATUSES,
  WAITING_OUTBOX_STATUSES,
} from '../outbox-states.js'
import {OUTBOX_OPERATIONS, type Database, type OutboxOperation, type OutboxRow, type OutboxStatus} from '../schema.js'

export interface StatusCount {
  operation: OutboxOperation
  status: OutboxStatus
  count: number
}

export interface OldestDue {
  operation: OutboxOperation
  /** The earliest next_attempt_at among pending and deferred rows already due; null when none is due. */
  pendingDueSince: number | null
  /** The earliest lease_expires_at among leased rows whose lease has expired; null when none has. */
  leaseExpiredSince: number | null
}

export interface ErrorGroup {
  status: AttentionStatus
  operation: OutboxOperation
  last_error_code: string | null
  count: number
  /** When the newest row of the group last changed. */
  latest_at: number
}

/** An outbox row as the status lists show it: no payload, no lease token. */
export type OutboxRowSummary = Pick<
  OutboxRow,
  | 'id'
  | 'operation'
  | 'status'
  | 'dispatch_namespace'
  | 'script_name'
  | 'company_id'
  | 'department_id'
  | 'attempts'
  | 'waits'
  | 'lease_owner'
  | 'lease_expires_at'
  | 'next_attempt_at'
  | 'last_error_code'
  | 'created_at'
  | 'updated_at'
>

const summaryColumns = [
  'id',
  'operation',
  'status',
  'dispatch_namespace',
  'script_name',
  'company_id',
  'department_id',
  'attempts',
  'waits',
  'lease_owner',
  'lease_expires_at',
  'next_attempt_at',
  'last_error_code',
  'created_at',
  'updated_at',
] as const

type OutboxQuery<O> = SelectQueryBuilder<Database, 'edge_worker_outbox', O>

export class StatusRepository {
  constructor(private readonly ctx: StoreContext) {}

  /** Rows per operation and open status (every row, however old). */
  async openCounts(scope: string | null): Promise<StatusCount[]> {
    const rows = await this.ctx.db
      .selectFrom('edge_worker_outbox')
      .select(['operation', 'status', (eb) => eb.fn.countAll<number | string>().as('count')])
      .$call(inScope(scope))
      .where('status', 'in', [...OPEN_OUTBOX_STATUSES])
      .groupBy(['status', 'operation'])
      .execute()
    return rows.map((row) => ({operation: row.operation, status: row.status, count: Number(row.count)}))
  }

  /**
   * Rows per operation and finished status that finished (last changed) at or after `since`. One
   * scalar count per pair, so each is a range seek on (scope, status, operation, updated_at).
   */
  async finishedCounts(scope: string | null, since: number): Promise<StatusCount[]> {
    const pairs = FINISHED_OUTBOX_STATUSES.flatMap((status) => OUTBOX_OPERATIONS.map((operation) => ({status, operation})))
    const row = await this.ctx.db
      .selectNoFrom((eb) =>
        pairs.map(({status, operation}, index) =>
          this.outboxIn(eb, scope)
            .select((inner) => inner.fn.countAll<number | string>().as('count'))
            .where('status', '=', status)
            .where('operation', '=', operation)
            .where('updated_at', '>=', since)
            .as(`c${index}`),
        ),
      )
      .executeTakeFirstOrThrow()
    const counts = row as Record<string, number | string | null>
    return pairs.map((pair, index) => ({...pair, count: Number(counts[`c${index}`] ?? 0)}))
  }

  /** Failed and uncertain rows a later completed row of the same kind on the same Worker has replaced. */
  async supersededFailures(scope: string | null): Promise<number> {
    const row = await this.ctx.db
      .selectFrom('edge_worker_outbox')
      .select((eb) => eb.fn.countAll<number | string>().as('count'))
      .$call(inScope(scope))
      .where('status', 'in', [...ATTENTION_OUTBOX_STATUSES])
      .where((eb) => supersededByLaterSuccess(eb))
      .executeTakeFirstOrThrow()
    return Number(row.count)
  }

  /** Per operation, how long its oldest due work has waited: one index seek each. */
  async oldestDue(scope: string | null, now: number): Promise<OldestDue[]> {
    const row = await this.ctx.db
      .selectNoFrom((eb) =>
        OUTBOX_OPERATIONS.flatMap((operation) => [
          ...WAITING_OUTBOX_STATUSES.map((status) =>
            this.outboxIn(eb, scope)
              .select((inner) => inner.fn.min('next_attempt_at').as('due'))
              .where('operation', '=', operation)
              .where(due(now, status))
              .as(`${operation}_${status}`),
          ),
          this.outboxIn(eb, scope)
            .select((inner) => inner.fn.min('lease_expires_at').as('due'))
            .where(leaseExpired(now))
            .where('operation', '=', operation)
            .as(`${operation}_leased`),
        ]),
      )
      .executeTakeFirstOrThrow()
    const since = row as Record<string, number | string | null>
    const time = (...values: Array<number | string | null | undefined>) => {
      const times = values.filter((value) => value !== null && value !== undefined).map(Number)
      return times.length > 0 ? Math.min(...times) : null
    }
    return OUTBOX_OPERATIONS.map((operation) => ({
      operation,
      pendingDueSince: time(...WAITING_OUTBOX_STATUSES.map((status) => since[`${operation}_${status}`])),
      leaseExpiredSince: time(since[`${operation}_leased`]),
    }))
  }

  /** Leased rows, the lease expiring soonest first. */
  async leasedRows(scope: string | null, limit: number): Promise<OutboxRowSummary[]> {
    return (
      this.ctx.db
        .selectFrom('edge_worker_outbox')
        .select(summaryColumns)
        .where('status', '=', 'leased')
        // Always true of a leased row; it lets the lease-expiry index (partial: rows with a lease) serve the order.
        .where('lease_expires_at', 'is not', null)
        .$call(inScope(scope))
        .orderBy('lease_expires_at')
        .orderBy('id')
        .limit(limit)
        .execute()
    )
  }

  /**
   * Rows put back to wait (host unavailable, fenced, their Worker busy: ../../engine/retry.ts), the
   * next due first, with their reason (last error code) and next attempt time.
   */
  async waitingRows(scope: string | null, limit: number): Promise<OutboxRowSummary[]> {
    return (
      this.ctx.db
        .selectFrom('edge_worker_outbox')
        .select(summaryColumns)
        // The waiting index's condition (partial: rows that wait and are scheduled).
        .where(sql<boolean>`waits > 0 and next_attempt_at is not null`)
        .where('status', 'in', ['pending', 'deferred'])
        .$call(inScope(scope))
        .orderBy('next_attempt_at')
        .orderBy('id')
        .limit(limit)
        .execute()
    )
  }

  /** Failed and uncertain rows grouped by status, operation and last error code; biggest group first. */
  async errorGroups(scope: string | null): Promise<ErrorGroup[]> {
    const rows = await this.ctx.db
      .selectFrom('edge_worker_outbox')
      .select([
        'status',
        'operation',
        'last_error_code',
        (eb) => eb.fn.countAll<number | string>().as('count'),
        (eb) => eb.fn.max('updated_at').as('latest_at'),
      ])
      .$call(inScope(scope))
      .where('status', 'in', [...ATTENTION_OUTBOX_STATUSES])
      .where((eb) => eb.not(supersededByLaterSuccess(eb)))
      .groupBy(['status', 'operation', 'last_error_code'])
      .execute()
    return rows
      .map((row) => ({
        status: row.status as AttentionStatus,
        operation: row.operation,
        last_error_code: row.last_error_code,
        count: Number(row.count),
        latest_at: Number(row.latest_at),
      }))
      .sort(
        (a, b) =>
          b.count - a.count ||
          b.latest_at - a.latest_at ||
          `${a.status}${a.operation}${a.last_error_code}`.localeCompare(`${b.status}${b.operation}${b.last_error_code}`),
      )
  }

  /** The rows of one error group, most recently changed first. */
  async groupRows(scope: string | null, group: Pick<ErrorGroup, 'status' | 'operation' | 'last_error_code'>, limit: number): Promise<OutboxRowSummary[]> {
    return this.ctx.db
      .selectFrom('edge_worker_outbox')
      .select(summaryColumns)
      .$call(inScope(scope))
      .where('status', '=', group.status)
      .where('operation', '=', group.operation)
      .where('last_error_code', group.last_error_code === null ? 'is' : '=', group.last_error_code)
      .where((eb) => eb.not(supersededByLaterSuccess(eb)))
      .orderBy('updated_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute()
  }

  private outboxIn(eb: ExpressionBuilder<Database, never>, scope: string | null) {
    return eb.selectFrom('edge_worker_outbox').$call(inScope(scope))
  }
}

/** The row is a deploy, and a deploy of the same Worker enqueued after it has completed (a seek on outbox(worker_id, created_at)). */
/**
 * The dedupe key of a control_audit row: its kind (operation and target — a secret name, a
 * runtime-config key, an account — or none), then the row's own id, which keeps every key unique.
 * Rows of one kind share everything but the id.
 */
export function controlAuditDedupeKey(kind: {operation: string; target: string | null}, rowId: string): string {
  return `control_audit:${kind.operation}:${kind.target ?? ''}:${rowId}`
}

/** The kind part of a control_audit dedupe key: all but the trailing row id (a UUID, 36 characters). */
const dedupeKind = (column: string) => sql`substr(${sql.ref(column)}, 1, length(${sql.ref(column)}) - 36)`

/** A failed or uncertain row that a later completed row of the same kind on the same Worker replaced. */
function supersededByLaterSuccess(eb: ExpressionBuilder<Database, 'edge_worker_outbox'>) {
  const laterCompleted = (operation: 'deploy' | 'control_audit') =>
    eb
      .selectFrom('edge_worker_outbox as later')
      .select(sql<number>`1`.as('one'))
      .whereRef('later.worker_id', '=', 'edge_worker_outbox.worker_id')
      .whereRef('later.created_at', '>', 'edge_worker_outbox.created_at')
      .where('later.operation', '=', operation)
      .where('later.status', '=', 'completed')
  return eb.or([
    eb.and([eb('edge_worker_outbox.operation', '=', 'deploy'), eb.exists(laterCompleted('deploy'))]),
    eb.and([
      eb('edge_worker_outbox.operation', '=', 'control_audit'),
      eb.exists(laterCompleted('control_audit').where(sql<boolean>`${dedupeKind('later.dedupe_key')} = ${dedupeKind('edge_worker_outbox.dedupe_key')}`)),
    ]),
  ])
}

function inScope(scope: string | null) {
  return <O>(query: OutboxQuery<O>): OutboxQuery<O> => (scope === null ? query : query.where('dispatch_namespace', '=', scope))
}
