// The durable outbox every lane works from: enqueue with a dedupe key, claim with a lease, settle
// fenced by the lease token, reschedule at the time the engine's retry rule chose, and the
// operator's row actions. The statements and the lease rules: ./statements.ts.
import {KitError} from '../../errors.js'
import type {StoreContext} from '../context.js'
import {idsWithPrefix} from '../repositories/id-prefix.js'
import {holdsLiveLease, isFinished, isSettled} from '../outbox-states.js'
import type {OutboxRow, OutboxTable} from '../schema.js'
import {cancelRow, claimLeases, insertRow, leaseRowById, makeDueNow, renewLeases, retryLeaseLater, settleLease, toOutboxRow} from './statements.js'
import type {
  ClaimOptions,
  EnqueueResult,
  LeaseByIdResult,
  LeaseDisposition,
  OperatorActionResult,
  OutboxEnqueueInput,
  OutboxListFilter,
  RetryLaterOptions,
  RetryOutcome,
  SettleOptions,
} from './types.js'

export class OutboxRepository {
  constructor(private readonly ctx: StoreContext) {}

  /** Inserts the row unless its dedupe key exists; concurrent enqueues of one key leave one row (unique index). */
  async enqueue(input: OutboxEnqueueInput): Promise<EnqueueResult> {
    return this.ctx.write(async (tx) => {
      const inserted = await insertRow(tx, input)
      if (inserted) return {row: toOutboxRow(inserted), duplicate: false}
      const existing = await tx.db.selectFrom('edge_worker_outbox').selectAll().where('dedupe_key', '=', input.dedupe_key).executeTakeFirst()
      if (!existing) throw new KitError('conflict', `outbox id ${input.id} is already used by a row with another dedupe key`)
      return {row: toOutboxRow(existing), duplicate: true}
    })
  }

  /**
   * Leases up to `limit` claimable rows of one operation and scope, oldest due first, in one
   * statement: due pending rows and rows whose lease expired. Concurrent claimers never get the same
   * row (PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite: the BEGIN IMMEDIATE write lock).
   */
  async claim(options: ClaimOptions): Promise<OutboxRow[]> {
    return this.ctx.write((tx) => claimLeases(tx, options))
  }

  /**
   * Leases one row by id for the deploy task in one statement; when it takes nothing, a read of the
   * row says why (that read may see a later state: it explains, it decides nothing).
   */
  async leaseById(id: string, options: Omit<ClaimOptions, 'operation' | 'limit'>): Promise<LeaseByIdResult> {
    return this.ctx.write(async (tx) => {
      const leased = await leaseRowById(tx, id, options)
      if (leased) return {disposition: 'acquired', row: toOutboxRow(leased)}
      const row = await tx.db.selectFrom('edge_worker_outbox').selectAll().where('id', '=', id).executeTakeFirst()
      return row ? {disposition: refusalOf(row, options.scope, tx.now()), row: toOutboxRow(row)} : {disposition: 'missing', row: null}
    })
  }

  /** Extends a held lease from now; false when the lease was lost. */
  async renewLease(id: string, token: string, options: {leaseSeconds: number}): Promise<boolean> {
    return this.ctx.write(async (tx) => (await renewLeases(tx, [{id, token}], options.leaseSeconds)) > 0)
  }

  /** Finishes a leased row. false = the lease was lost and nothing changed. */
  async settle(id: string, token: string, options: SettleOptions): Promise<boolean> {
    return this.ctx.write((tx) => settleLease(tx, {id, token}, options))
  }

  /**
   * Gives a leased row back as `pending` (or `deferred`: the host refused it while fenced), due at
   * `nextAttemptAt` — or, when that is null (the engine's retry rule says attempts ran out), settles
   * it `failed`, visible to an operator.
   */
  async retryLater(id: string, token: string, failure: RetryLaterOptions): Promise<RetryOutcome> {
    return this.ctx.write((tx) => retryLeaseLater(tx, {id, token}, failure))
  }

  /**
   * Operator "retry now": a pending, deferred, failed or uncertain row — or one whose lease expired —
   * becomes pending (a deferred one stays deferred) and due now, handed to the passes: no lease, no
   * claim, no reservation, its run of waits over (the backoff starts again). Its attempts and last
   * error stay: they record what happened. A row held
   * under a live lease is refused, never taken from its runner.
   */
  async retryNow(id: string, options: {scope: string | null}): Promise<OperatorActionResult> {
    return this.operatorAction(id, options.scope, async (row, tx) => {
      if (isFinished(row.status)) return 'terminal'
      await makeDueNow(tx, row)
      return 'done'
    })
  }

  /**
   * Operator cancel: the row becomes `cancelled` and no lane takes it again; its last error stays as
   * evidence. Refused under a live lease, for a finished row, and for a deploy whose version is
   * `deploying` (an earlier attempt may have reached the host: only a pass can tell).
   */
  async cancel(id: string, options: {scope: string | null}): Promise<OperatorActionResult> {
    return this.operatorAction(id, options.scope, async (row, tx) => {
      if (isFinished(row.status)) return 'terminal'
      if (row.operation === 'deploy' && row.version_id !== null) {
        const version = await tx.lockRow('edge_worker_versions', row.version_id)
        if (version?.state === 'deploying') return 'deploying'
      }
      await cancelRow(tx, id)
      return 'done'
    })
  }

  /** Locks the row (lock order outbox → worker → version), checks scope and lease, then lets `act` decide. */
  private async operatorAction(
    id: string,
    scope: string | null,
    act: (row: OutboxTable, tx: StoreContext) => Promise<'done' | 'terminal' | 'deploying'>,
  ): Promise<OperatorActionResult> {
    return this.ctx.atomic(async (tx) => {
      const row = await tx.lockRow('edge_worker_outbox', id)
      if (!row) return {outcome: 'missing', row: null}
      const before = toOutboxRow(row)
      if (scope !== null && row.dispatch_namespace !== scope) return {outcome: 'wrong_scope', row: before}
      if (holdsLiveLease(row, this.ctx.now())) return {outcome: 'inflight', row: before}
      const outcome = await act(row, tx)
      if (outcome !== 'done') return {outcome, row: before}
      const after = await tx.db.selectFrom('edge_worker_outbox').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
      return {outcome, before, row: toOutboxRow(after)}
    })
  }

  async get(id: string): Promise<OutboxRow | undefined> {
    const row = await this.ctx.db.selectFrom('edge_worker_outbox').selectAll().where('id', '=', id).executeTakeFirst()
    return row && toOutboxRow(row)
  }

  /** Up to `limit` ids starting with `prefix`, in id order: what a short id may mean. */
  idsWithPrefix(prefix: string, limit: number): Promise<string[]> {
    return idsWithPrefix(this.ctx.db, 'edge_worker_outbox', prefix, limit)
  }

  async list(filter: OutboxListFilter = {}): Promise<OutboxRow[]> {
    const rows = await this.ctx.db
      .selectFrom('edge_worker_outbox')
      .selectAll()
      .$if(filter.status !== undefined, (q) => q.where('status', '=', filter.status!))
      .$if(filter.operation !== undefined, (q) => q.where('operation', '=', filter.operation!))
      .$if(filter.errorCode !== undefined, (q) => q.where('last_error_code', '=', filter.errorCode!))
      .$if(filter.scope !== undefined, (q) => q.where('dispatch_namespace', '=', filter.scope!))
      .$if(filter.workerId !== undefined, (q) => q.where('worker_id', '=', filter.workerId!))
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(filter.limit ?? 50)
      .execute()
    return rows.map(toOutboxRow)
  }
}

/** Why a lease could not be taken on the row. Scope first: a row of another kit is never touched. */
function refusalOf(row: OutboxTable, scope: string, now: number): Exclude<LeaseDisposition, 'acquired'> {
  if (row.dispatch_namespace !== scope) return 'wrong_scope'
  if (isSettled(row.status)) return 'terminal'
  if (holdsLiveLease(row, now)) return 'inflight'
  return 'not_due'
}
