// The durable outbox every lane works from: enqueue with a dedupe key, claim with a lease, settle
// fenced by the lease token, reschedule at the time the engine's retry rule chose.
//
// Lease rules (the statuses, moves and shared predicates: ../outbox-states.ts):
// - a lease is (lease_owner, lease_token, lease_expires_at) on a `leased` row; every claim (this
//   one, the deploy sweeps') or leaseById writes a fresh random token, ends any sweep's claim stamp
//   and the enqueuer's reservation (leaseAssignments). A lease counts no attempt: the write that
//   ends it does, when the runner asked the host (`attempted`; the rule: ../../engine/retry.ts);
// - a `pending` row is claimable once due (next_attempt_at <= now) and no claim holds it; a `leased`
//   row once its lease expired; a `deferred` row only by the deferred lane's sweep;
// - settle/renew/retryLater match `id AND lease_token`: matching nothing means the lease was lost
//   (another runner reclaimed the row) and nothing changes. Ending a lease clears the token.
import {randomUUID} from 'node:crypto'
import {sql, type ExpressionBuilder, type RawBuilder} from 'kysely'
import {canonicalJson} from '../../canonical-json.js'
import {KitError} from '../../errors.js'
import type {StoreContext} from '../context.js'
import {newId} from '../ids.js'
import {parseJsonObject, type Database, type JsonObject, type OutboxOperation, type OutboxRow, type OutboxStatus, type OutboxTable} from '../schema.js'
import {claimable, due, endClaim, holdsLiveLease, isFinished, isSettled, leaseExpired, type SettledOutboxStatus, type WaitingStatus} from '../outbox-states.js'

export interface OutboxEnqueueInput {
  /** Defaults to a random UUID; control-audit rows pass the id their audit row will reuse. */
  id?: string
  operation: OutboxOperation
  dedupe_key: string
  dispatch_namespace: string
  company_id?: string | null
  department_id?: string | null
  worker_id?: string | null
  version_id?: string | null
  script_name?: string | null
  payload: JsonObject
  /** Defaults to now (due at once). */
  next_attempt_at?: number | null
  /** Default `pending`; `deferred` for a deploy enqueued while a backup fence is open (the deferred lane takes it). */
  status?: WaitingStatus
  /** Why the row waits, for operators (e.g. `edge_host_fenced` on a deferred deploy). */
  last_error_code?: string | null
  /**
   * The runner that will dispatch the row itself (a waiting `deploy`, a control command): the sweeps
   * leave a never-attempted row so reserved alone for their grace. null = theirs at once.
   */
  reserved_by?: string | null
}

export interface EnqueueResult {
  row: OutboxRow
  /** true: a row with this dedupe key already existed and is returned unchanged; nothing was written. */
  duplicate: boolean
}

export interface ClaimOptions {
  operation: OutboxOperation
  /** The kit scope (`dispatch_namespace`) whose rows this runner may take. */
  scope: string
  owner: string
  limit: number
  leaseSeconds: number
}

export type LeaseDisposition = 'acquired' | 'terminal' | 'inflight' | 'not_due' | 'wrong_scope'
export type LeaseByIdResult = {disposition: LeaseDisposition; row: OutboxRow} | {disposition: 'missing'; row: null}

export interface SettleOptions {
  status: SettledOutboxStatus
  errorCode?: string | null
  error?: string | null
  /** The runner asked the host (or the artifact store) about the row in this run: one attempt more. */
  attempted?: boolean
}

/** A leased row handed back for later (the engine's retry rule chose the time: ../../engine/retry.ts). */
export interface RetryLaterOptions {
  errorCode: string
  error: string
  /** When the row is due again; null = its attempts ran out, it settles `failed`. */
  nextAttemptAt: number | null
  /** The row's run of consecutive waits from now on (0 after a failed attempt). */
  waits: number
  /** The runner asked the host about the row in this run: one attempt more. */
  attempted: boolean
  /** The host refused while fenced: the row waits `deferred` for the deferred lane. */
  deferred?: boolean
}

export type RetryOutcome = {outcome: 'rescheduled'; nextAttemptAt: number} | {outcome: 'failed'} | {outcome: 'lease_lost'}

/**
 * An operator's action on one row (`retryNow`, `cancel`), or why it was refused: the row is gone,
 * belongs to another kit's scope, is held under a live lease, is already finished, or (cancel) is a
 * deploy whose version may already be on the host.
 */
export type OperatorActionResult =
  | {outcome: 'done'; before: OutboxRow; row: OutboxRow}
  | {outcome: 'wrong_scope' | 'inflight' | 'terminal' | 'deploying'; row: OutboxRow}
  | {outcome: 'missing'; row: null}

export interface OutboxListFilter {
  status?: OutboxStatus
  operation?: OutboxOperation
  errorCode?: string
  scope?: string
  workerId?: string
  /** Newest first; default 50. */
  limit?: number
}

export class OutboxRepository {
  constructor(private readonly ctx: StoreContext) {}

  /** Inserts the row unless its dedupe key exists; concurrent enqueues of one key leave one row (unique index). */
  async enqueue(input: OutboxEnqueueInput): Promise<EnqueueResult> {
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const inserted = await db
        .insertInto('edge_worker_outbox')
        .values({
          id: input.id ?? newId(),
          operation: input.operation,
          status: input.status ?? 'pending',
          dedupe_key: input.dedupe_key,
          company_id: input.company_id ?? null,
          department_id: input.department_id ?? null,
          worker_id: input.worker_id ?? null,
          version_id: input.version_id ?? null,
          script_name: input.script_name ?? null,
          dispatch_namespace: input.dispatch_namespace,
          payload: canonicalJson(input.payload),
          attempts: 0,
          waits: 0,
          next_attempt_at: input.next_attempt_at === undefined ? now : input.next_attempt_at,
          last_error_code: input.last_error_code ?? null,
          reserved_by: input.reserved_by ?? null,
          created_at: now,
          updated_at: now,
        })
        .onConflict((oc) => oc.doNothing())
        .returningAll()
        .executeTakeFirst()
      if (inserted) return {row: toOutboxRow(inserted), duplicate: false}
      const existing = await db.selectFrom('edge_worker_outbox').selectAll().where('dedupe_key', '=', input.dedupe_key).executeTakeFirst()
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
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const {operation, scope, limit} = options
      const {rows} = await sql<OutboxTable>`
        update edge_worker_outbox
        set ${leaseAssignments(options, now)}
        where id in (${claimableIds(this.ctx, {operation, scope, limit, now})})
        returning *`.execute(db)
      return rows.map(toOutboxRow).sort((a, b) => a.created_at - b.created_at || a.id.localeCompare(b.id))
    })
  }

  /**
   * Leases one row by id for the deploy task in one statement; when it takes nothing, a read of the
   * row says why (that read may see a later state: it explains, it decides nothing).
   */
  async leaseById(id: string, options: Omit<ClaimOptions, 'operation' | 'limit'>): Promise<LeaseByIdResult> {
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const {rows} = await sql<OutboxTable>`
        update edge_worker_outbox set ${leaseAssignments(options, now)}
        where id = ${id} and dispatch_namespace = ${options.scope} and ${claimable(now)}
        returning *`.execute(db)
      if (rows[0]) return {disposition: 'acquired', row: toOutboxRow(rows[0])}
      const row = await db.selectFrom('edge_worker_outbox').selectAll().where('id', '=', id).executeTakeFirst()
      return row ? {disposition: refusalOf(row, options.scope, now), row: toOutboxRow(row)} : {disposition: 'missing', row: null}
    })
  }

  /** Extends a held lease from now; false when the lease was lost. */
  async renewLease(id: string, token: string, options: {leaseSeconds: number}): Promise<boolean> {
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const result = await db
        .updateTable('edge_worker_outbox')
        .set({lease_expires_at: now + options.leaseSeconds * 1000, updated_at: now})
        .where('id', '=', id)
        .where('lease_token', '=', token)
        .executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }

  /** Finishes a leased row. false = the lease was lost and nothing changed. */
  async settle(id: string, token: string, options: SettleOptions): Promise<boolean> {
    if (!isSettled(options.status)) {
      throw new Error(`settle needs a terminal status, not ${options.status}`)
    }
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const result = await db
        .updateTable('edge_worker_outbox')
        .set((eb) => ({
          status: options.status,
          lease_token: null,
          lease_expires_at: null,
          next_attempt_at: null,
          last_error_code: options.errorCode ?? null,
          last_error: options.error ?? null,
          attempts: attemptsAfter(eb, options.attempted ?? false),
          updated_at: now,
        }))
        .where('id', '=', id)
        .where('lease_token', '=', token)
        .executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }

  /**
   * Gives a leased row back as `pending` (or `deferred`: the host refused it while fenced), due at
   * `nextAttemptAt` — or, when that is null (the engine's retry rule says attempts ran out), settles
   * it `failed`, visible to an operator.
   */
  async retryLater(id: string, token: string, failure: RetryLaterOptions): Promise<RetryOutcome> {
    return this.ctx.write(async ({db}) => {
      const {nextAttemptAt} = failure
      const result = await db
        .updateTable('edge_worker_outbox')
        .set((eb) => ({
          status: nextAttemptAt === null ? 'failed' : failure.deferred ? 'deferred' : 'pending',
          lease_token: null,
          lease_expires_at: null,
          next_attempt_at: nextAttemptAt,
          last_error_code: failure.errorCode,
          last_error: failure.error,
          attempts: attemptsAfter(eb, failure.attempted),
          waits: failure.waits,
          updated_at: this.ctx.now(),
        }))
        .where('id', '=', id)
        .where('lease_token', '=', token)
        .executeTakeFirst()
      if (result.numUpdatedRows === 0n) return {outcome: 'lease_lost'}
      return nextAttemptAt === null ? {outcome: 'failed'} : {outcome: 'rescheduled', nextAttemptAt}
    })
  }

  /**
   * Operator "retry now": a pending, deferred, failed or uncertain row — or one whose lease expired —
   * becomes pending (a deferred one stays deferred) and due now, handed to the passes: no lease, no
   * claim, no reservation, its run of waits over (the backoff starts again). Its attempts and last
   * error stay: they record what happened. A row held
   * under a live lease is refused, never taken from its runner.
   */
  async retryNow(id: string, options: {scope: string | null}): Promise<OperatorActionResult> {
    return this.operatorAction(id, options.scope, async (row, {db}) => {
      if (isFinished(row.status)) return 'terminal'
      const now = this.ctx.now()
      await db
        .updateTable('edge_worker_outbox')
        .set({
          status: row.status === 'deferred' ? 'deferred' : 'pending',
          next_attempt_at: now,
          lease_owner: null,
          lease_token: null,
          lease_expires_at: null,
          claimed_by: null,
          claim_expires_at: null,
          reserved_by: null,
          waits: 0,
          updated_at: now,
        })
        .where('id', '=', id)
        .execute()
      return 'done'
    })
  }

  /**
   * Operator cancel: the row becomes `cancelled` and no lane takes it again; its last error stays as
   * evidence. Refused under a live lease, for a finished row, and for a deploy whose version is
   * `deploying` (an earlier attempt may have reached the host: only a pass can tell).
   */
  async cancel(id: string, options: {scope: string | null}): Promise<OperatorActionResult> {
    return this.operatorAction(id, options.scope, async (row, {db}) => {
      if (isFinished(row.status)) return 'terminal'
      if (row.operation === 'deploy' && row.version_id !== null) {
        const version = await db
          .selectFrom('edge_worker_versions')
          .select('state')
          .where('id', '=', row.version_id)
          .$if(this.ctx.locksRows, (q) => q.forUpdate())
          .executeTakeFirst()
        if (version?.state === 'deploying') return 'deploying'
      }
      await db
        .updateTable('edge_worker_outbox')
        .set({
          status: 'cancelled',
          next_attempt_at: null,
          lease_token: null,
          lease_expires_at: null,
          claimed_by: null,
          claim_expires_at: null,
          updated_at: this.ctx.now(),
        })
        .where('id', '=', id)
        .execute()
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
      const row = await tx.db
        .selectFrom('edge_worker_outbox')
        .selectAll()
        .where('id', '=', id)
        .$if(this.ctx.locksRows, (q) => q.forUpdate())
        .executeTakeFirst()
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

  /** Up to `limit` ids starting with `prefix` (lowercase hex and dashes only), in id order: what a short id may mean. */
  async idsWithPrefix(prefix: string, limit: number): Promise<string[]> {
    if (!/^[0-9a-f-]+$/.test(prefix)) return []
    const rows = await this.ctx.db.selectFrom('edge_worker_outbox').select('id').where('id', 'like', `${prefix}%`).orderBy('id').limit(limit).execute()
    return rows.map((row) => row.id)
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

/**
 * The ids of up to `limit` rows of one operation and scope a lane may take now, oldest due first:
 * due pending rows (that also meet `pendingAlso`, e.g. a sweep's grace for reservations) and expired
 * leases. Two index-ordered branches (each walks its own index) instead of one OR, which would sort
 * every due row on each claim. Concurrent claimers never get the same row (PostgreSQL: FOR UPDATE
 * SKIP LOCKED; SQLite: the BEGIN IMMEDIATE write lock).
 */
export function claimableIds(
  ctx: StoreContext,
  options: {operation: OutboxOperation; scope: string; limit: number; now: number; pendingAlso?: RawBuilder<boolean>},
) {
  const {operation, scope, limit, now} = options
  const skipLocked = ctx.locksRows ? sql`for update skip locked` : sql``
  const also = options.pendingAlso ? sql`and ${options.pendingAlso}` : sql``
  return sql`
    select id from (
      select id, due_at, created_at from (
        select id, next_attempt_at as due_at, created_at from edge_worker_outbox
        where operation = ${operation} and dispatch_namespace = ${scope} and ${due(now)} ${also}
        order by next_attempt_at, created_at, id
        limit ${limit}
        ${skipLocked}
      ) as due_pending
      union all
      select id, due_at, created_at from (
        select id, lease_expires_at as due_at, created_at from edge_worker_outbox
        where ${leaseExpired(now)} and operation = ${operation} and dispatch_namespace = ${scope}
        order by lease_expires_at, created_at, id
        limit ${limit}
        ${skipLocked}
      ) as expired_leases
    ) as claimable
    order by due_at, created_at, id
    limit ${limit}`
}

/**
 * The SET clause of every lease taken (claim, leaseById, a deploy sweep's claim): a fresh token, no
 * claim stamp or reservation left (the row was dispatched), and no attempt counted — a runner that
 * dies before it reaches the host has spent nothing.
 */
export function leaseAssignments(options: {owner: string; leaseSeconds: number}, now: number) {
  return sql`status = 'leased', lease_owner = ${options.owner}, lease_token = ${randomUUID()},
    lease_expires_at = ${now + options.leaseSeconds * 1000}, reserved_by = null, ${endClaim}, updated_at = ${now}`
}

/** The attempts column after a write that ends a lease: one more when the runner asked the host. */
export function attemptsAfter(eb: ExpressionBuilder<Database, 'edge_worker_outbox'>, attempted: boolean) {
  return attempted ? eb('attempts', '+', 1) : eb.ref('attempts')
}

/** Why a lease could not be taken on the row. Scope first: a row of another kit is never touched. */
export function refusalOf(row: OutboxTable, scope: string, now: number): Exclude<LeaseDisposition, 'acquired'> {
  if (row.dispatch_namespace !== scope) return 'wrong_scope'
  if (isSettled(row.status)) return 'terminal'
  if (holdsLiveLease(row, now)) return 'inflight'
  return 'not_due'
}

export function toOutboxRow(row: OutboxTable): OutboxRow {
  return {...row, payload: parseJsonObject(row.payload)}
}
