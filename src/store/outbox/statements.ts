// Every statement that writes edge_worker_outbox, and no other module of the store writes it
// (test/unit/store/outbox-writers.test.ts). The repositories call these inside their own
// transactions: each takes the StoreContext of the caller's transaction (or of the pool, for a
// write that is one statement). The statuses, moves and shared predicates: ../outbox-states.ts.
//
// Lease rules:
// - a lease is (lease_owner, lease_token, lease_expires_at) on a `leased` row; every lease taken (a
//   claim, leaseRowById) writes a fresh random token, ends any sweep's claim stamp and the enqueuer's
//   reservation (leaseAssignments). A lease counts no attempt: the write that ends it does, when the
//   runner asked the host (`attempted`; the rule: ../../engine/retry.ts);
// - a `pending` row is claimable once due (next_attempt_at <= now) and no claim holds it; a `leased`
//   row once its lease expired; a `deferred` row only by the deferred lane's sweep;
// - every write on a leased row matches `id AND lease_token`: matching nothing means the lease was
//   lost (another runner reclaimed the row) and nothing changes. Ending a lease clears the token.
import {randomUUID} from 'node:crypto'
import {sql, type ExpressionBuilder} from 'kysely'
import {canonicalJson} from '../../canonical-json.js'
import type {StoreContext} from '../context.js'
import {newId} from '../ids.js'
import {carriesClaim, claimable, claimAssignments, due, endClaim, isSettled, leaseExpired, type ClaimStamp} from '../outbox-states.js'
import {parseJsonObject, type Database, type OutboxRow, type OutboxTable} from '../schema.js'
import type {AckEnding, HeldLease, HostWait, LeaseClaim, LeaseEnding, OutboxEnqueueInput, RetryLaterOptions, RetryOutcome, SettleOptions} from './types.js'

/** Inserts the row unless its dedupe key exists (unique index); the row written, or undefined. */
export async function insertRow(tx: StoreContext, input: OutboxEnqueueInput): Promise<OutboxTable | undefined> {
  const now = tx.now()
  return tx.db
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
}

/**
 * Leases up to `limit` claimable rows of one operation and scope, oldest due first, in one
 * statement: due pending rows (that also meet `pendingAlso`) and rows whose lease expired.
 */
export async function claimLeases(tx: StoreContext, claim: LeaseClaim): Promise<OutboxRow[]> {
  const now = tx.now()
  const {rows} = await sql<OutboxTable>`
    update edge_worker_outbox
    set ${leaseAssignments(claim, now)}
    where id in (${claimableIds(tx, claim, now)})
    returning *`.execute(tx.db)
  return rows.map(toOutboxRow).sort(oldestFirst)
}

/**
 * Leases every due deferred deploy of the scope (no batch cap), oldest first. The lane claims only
 * while the gate is open, so the dispatch is accepted: the reason the row waited is cleared.
 */
export async function claimDeferredLeases(tx: StoreContext, claim: {scope: string; owner: string; leaseSeconds: number}): Promise<OutboxRow[]> {
  const now = tx.now()
  const {rows} = await sql<OutboxTable>`
    update edge_worker_outbox
    set ${leaseAssignments(claim, now)}, last_error_code = null, last_error = null
    where id in (
      select id from edge_worker_outbox
      where operation = 'deploy' and dispatch_namespace = ${claim.scope} and ${due(now, 'deferred')}
      order by created_at, id
      ${skipLocked(tx)}
    )
    returning *`.execute(tx.db)
  return rows.map(toOutboxRow).sort(oldestFirst)
}

/** Leases one row by id if it is claimable now and of the scope; undefined when it took nothing. */
export async function leaseRowById(
  tx: StoreContext,
  id: string,
  claim: {scope: string; owner: string; leaseSeconds: number},
): Promise<OutboxTable | undefined> {
  const now = tx.now()
  const {rows} = await sql<OutboxTable>`
    update edge_worker_outbox set ${leaseAssignments(claim, now)}
    where id = ${id} and dispatch_namespace = ${claim.scope} and ${claimable(now)}
    returning *`.execute(tx.db)
  return rows[0]
}

/** Extends held leases from now (one statement: keep the slice within the parameter limit). Returns how many were still held. */
export async function renewLeases(tx: StoreContext, leases: readonly HeldLease[], leaseSeconds: number): Promise<number> {
  if (leases.length === 0) return 0
  const now = tx.now()
  // Tokens are random per lease: a row matches only under the token its runner holds.
  const result = await tx.db
    .updateTable('edge_worker_outbox')
    .set({lease_expires_at: now + leaseSeconds * 1000, updated_at: now})
    .where('status', '=', 'leased')
    .where(
      'id',
      'in',
      leases.map((lease) => lease.id),
    )
    .where(
      'lease_token',
      'in',
      leases.map((lease) => lease.token),
    )
    .executeTakeFirst()
  return Number(result.numUpdatedRows)
}

/** The one write that ends a lease: settle, retry later, hand back. false = the lease was lost and nothing changed. */
export async function endLease(tx: StoreContext, lease: HeldLease, ending: LeaseEnding, now = tx.now()): Promise<boolean> {
  const result = await leaseEnd(tx, lease, ending, now).executeTakeFirst()
  return result.numUpdatedRows > 0n
}

/** Finishes a leased row. false = the lease was lost and nothing changed. */
export async function settleLease(tx: StoreContext, lease: HeldLease, settle: SettleOptions): Promise<boolean> {
  if (!isSettled(settle.status)) throw new Error(`settle needs a terminal status, not ${settle.status}`)
  return endLease(tx, lease, {
    status: settle.status,
    nextAttemptAt: null,
    errorCode: settle.errorCode ?? null,
    error: settle.error ?? null,
    attempted: settle.attempted ?? false,
  })
}

/**
 * Gives a leased row back as `pending` (or `deferred`: the host refused it while fenced), due at
 * `nextAttemptAt` — or, when that is null (the engine's retry rule says attempts ran out), settles
 * it `failed`, visible to an operator.
 */
export async function retryLeaseLater(tx: StoreContext, lease: HeldLease, failure: RetryLaterOptions): Promise<RetryOutcome> {
  const {nextAttemptAt} = failure
  const ended = await endLease(tx, lease, {
    status: nextAttemptAt === null ? 'failed' : failure.deferred ? 'deferred' : 'pending',
    nextAttemptAt,
    errorCode: failure.errorCode,
    error: failure.error,
    waits: failure.waits,
    attempted: failure.attempted,
  })
  if (!ended) return {outcome: 'lease_lost'}
  return nextAttemptAt === null ? {outcome: 'failed'} : {outcome: 'rescheduled', nextAttemptAt}
}

/**
 * Ends the lease of a control row `completed` (the receipt read that led here is an attempt) and
 * hands the row to the ack round: due now, claimed by its lease owner with a stamp that expires at
 * once — it only keys the settling runner's own ack. undefined = the lease was lost.
 */
export async function completeControlLease(tx: StoreContext, lease: HeldLease): Promise<{stamp: ClaimStamp; attempts: number; waits: number} | undefined> {
  const now = tx.now()
  const claim = await leaseEnd(tx, lease, {status: 'completed', nextAttemptAt: now, errorCode: null, error: null, waits: 0, attempted: true}, now)
    .set({claimed_by: sql<string>`lease_owner`, claim_expires_at: now})
    .returning(['claimed_by', 'attempts', 'waits'])
    .executeTakeFirst()
  if (!claim) return undefined
  return {stamp: {id: lease.id, status: 'completed', claimed_by: claim.claimed_by!, claim_expires_at: now}, attempts: claim.attempts, waits: claim.waits}
}

/** Claims completed control rows whose acknowledgement is due: the stamp holds them for `leaseSeconds`. */
export async function claimAckStamps(tx: StoreContext, claim: {scope: string; owner: string; limit: number; leaseSeconds: number}): Promise<OutboxRow[]> {
  const now = tx.now()
  const {rows} = await sql<OutboxTable>`
    update edge_worker_outbox
    set ${claimAssignments(claim.owner, now, claim.leaseSeconds)}
    where id in (
      select id from edge_worker_outbox
      where operation = 'control_audit' and dispatch_namespace = ${claim.scope} and ${due(now, 'completed')}
      order by next_attempt_at, created_at, id
      limit ${claim.limit}
      ${skipLocked(tx)}
    )
    returning *`.execute(tx.db)
  return rows.map(toOutboxRow).sort(oldestFirst)
}

/** Ends an ack round's claim on a completed row (compare-and-set on its stamp). false = another runner's claim holds the row. */
export async function endAckClaim(tx: StoreContext, stamp: ClaimStamp, ending: AckEnding): Promise<boolean> {
  const result = await tx.db
    .updateTable('edge_worker_outbox')
    .where(carriesClaim(stamp))
    .set((eb) => ({
      next_attempt_at: ending.nextAttemptAt,
      claimed_by: null,
      claim_expires_at: null,
      last_error_code: ending.errorCode,
      last_error: ending.error,
      attempts: attemptsAfter(eb, ending.attempted),
      ...(ending.waits === undefined ? {} : {waits: ending.waits}),
      updated_at: tx.now(),
    }))
    .executeTakeFirst()
  return result.numUpdatedRows > 0n
}

/**
 * Operator "retry now" on a row the caller locked: waiting again (a deferred one stays deferred) and
 * due now — no lease, no claim, no reservation, its run of waits over. Attempts and last error stay.
 */
export async function makeDueNow(tx: StoreContext, row: Pick<OutboxTable, 'id' | 'status'>): Promise<void> {
  const now = tx.now()
  await tx.db
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
    .where('id', '=', row.id)
    .execute()
}

/** Operator cancel of a row the caller locked: `cancelled`, no lease or claim left; its last error stays as evidence. */
export async function cancelRow(tx: StoreContext, id: string): Promise<void> {
  await tx.db
    .updateTable('edge_worker_outbox')
    .set({
      status: 'cancelled',
      next_attempt_at: null,
      lease_token: null,
      lease_expires_at: null,
      claimed_by: null,
      claim_expires_at: null,
      updated_at: tx.now(),
    })
    .where('id', '=', id)
    .execute()
}

/** Cancels the pending artifact-cleanup intents of these dedupe keys: their artifacts belong to `versionId` now. */
export async function adoptIntents(tx: StoreContext, dedupeKeys: readonly string[], versionId: string): Promise<void> {
  if (dedupeKeys.length === 0) return
  await pendingIntents(tx, dedupeKeys)
    .set({status: 'cancelled', next_attempt_at: null, last_error_code: 'adopted', last_error: `artifact adopted by version ${versionId}`, updated_at: tx.now()})
    .execute()
}

/** Makes the pending artifact-cleanup intents of these dedupe keys due now, saying why. Returns how many. */
export async function makeIntentsDue(tx: StoreContext, dedupeKeys: readonly string[], errorCode: string): Promise<number> {
  if (dedupeKeys.length === 0) return 0
  const now = tx.now()
  const result = await pendingIntents(tx, dedupeKeys).set({next_attempt_at: now, last_error_code: errorCode, updated_at: now}).executeTakeFirst()
  return Number(result.numUpdatedRows)
}

/** Pending rows (and completed control rows whose receipt acknowledgement waits) of one operation and scope, not yet due, waiting for a host they could not reach (their last error code). */
export function waitingForHostRows(wait: HostWait, now: number) {
  // completed: a control row whose receipt acknowledgement waits.
  return sql<boolean>`(operation = ${wait.operation} and dispatch_namespace = ${wait.scope} and status in ('pending', 'completed')
    and next_attempt_at > ${now} and waits > 0 and last_error_code = ${wait.errorCode})`
}

/** Makes the rows `waitingForHostRows` finds due now (their run of waits stays). Returns how many. */
export async function wakeHostWaits(tx: StoreContext, wait: HostWait): Promise<number> {
  const now = tx.now()
  const result = await tx.db
    .updateTable('edge_worker_outbox')
    .set({next_attempt_at: now, updated_at: now})
    .where(waitingForHostRows(wait, now))
    .executeTakeFirst()
  return Number(result.numUpdatedRows)
}

/** Moves the unfinished rows of scope `from` to scope `to`, due at once (a replaced host). Returns how many moved. */
export async function moveUnfinishedRows(tx: StoreContext, from: string, to: string): Promise<number> {
  const moved = await tx.db
    .updateTable('edge_worker_outbox')
    .set({dispatch_namespace: to})
    .where('dispatch_namespace', '=', from)
    .where('status', 'not in', ['completed', 'cancelled'])
    .executeTakeFirst()
  // A backoff earned against the old host says nothing about the new one: moved rows are due now.
  const now = tx.now()
  await tx.db
    .updateTable('edge_worker_outbox')
    .set({next_attempt_at: now, updated_at: now})
    .where('dispatch_namespace', '=', to)
    .where('status', '=', 'pending')
    .where('next_attempt_at', '>', now)
    .execute()
  return Number(moved.numUpdatedRows)
}

export function toOutboxRow(row: OutboxTable): OutboxRow {
  return {...row, payload: parseJsonObject(row.payload)}
}

const oldestFirst = (a: OutboxRow, b: OutboxRow) => a.created_at - b.created_at || a.id.localeCompare(b.id)

function leaseEnd(tx: StoreContext, lease: HeldLease, ending: LeaseEnding, now: number) {
  return tx.db
    .updateTable('edge_worker_outbox')
    .set((eb) => ({
      status: ending.status,
      lease_token: null,
      lease_expires_at: null,
      next_attempt_at: ending.nextAttemptAt,
      ...(ending.errorCode === undefined ? {} : {last_error_code: ending.errorCode}),
      ...(ending.error === undefined ? {} : {last_error: ending.error}),
      attempts: attemptsAfter(eb, ending.attempted),
      ...(ending.waits === undefined ? {} : {waits: ending.waits}),
      updated_at: now,
    }))
    .where('id', '=', lease.id)
    .where('lease_token', '=', lease.token)
}

function pendingIntents(tx: StoreContext, dedupeKeys: readonly string[]) {
  return tx.db
    .updateTable('edge_worker_outbox')
    .where('operation', '=', 'artifact_cleanup')
    .where('status', '=', 'pending')
    .where('dedupe_key', 'in', [...dedupeKeys])
}

/**
 * The ids of up to `limit` rows of one operation and scope a lane may take now, oldest due first:
 * due pending rows (that also meet `pendingAlso`) and expired leases. Two index-ordered branches
 * (each walks its own index) instead of one OR, which would sort every due row on each claim.
 * Concurrent claimers never get the same row (PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite: the
 * BEGIN IMMEDIATE write lock).
 */
function claimableIds(tx: StoreContext, claim: LeaseClaim, now: number) {
  const {operation, scope, limit} = claim
  const also = claim.pendingAlso ? sql`and ${claim.pendingAlso(now)}` : sql``
  return sql`
    select id from (
      select id, due_at, created_at from (
        select id, next_attempt_at as due_at, created_at from edge_worker_outbox
        where operation = ${operation} and dispatch_namespace = ${scope} and ${due(now)} ${also}
        order by next_attempt_at, created_at, id
        limit ${limit}
        ${skipLocked(tx)}
      ) as due_pending
      union all
      select id, due_at, created_at from (
        select id, lease_expires_at as due_at, created_at from edge_worker_outbox
        where ${leaseExpired(now)} and operation = ${operation} and dispatch_namespace = ${scope}
        order by lease_expires_at, created_at, id
        limit ${limit}
        ${skipLocked(tx)}
      ) as expired_leases
    ) as claimable
    order by due_at, created_at, id
    limit ${limit}`
}

/**
 * The SET clause of every lease taken: a fresh token, no claim stamp or reservation left (the row
 * was dispatched), and no attempt counted — a runner that dies before it reaches the host has spent
 * nothing.
 */
function leaseAssignments(claim: {owner: string; leaseSeconds: number}, now: number) {
  return sql`status = 'leased', lease_owner = ${claim.owner}, lease_token = ${randomUUID()},
    lease_expires_at = ${now + claim.leaseSeconds * 1000}, reserved_by = null, ${endClaim}, updated_at = ${now}`
}

/** The attempts column after a write that ends a lease or a claim: one more when the runner asked the host. */
function attemptsAfter(eb: ExpressionBuilder<Database, 'edge_worker_outbox'>, attempted: boolean) {
  return attempted ? eb('attempts', '+', 1) : eb.ref('attempts')
}

function skipLocked(tx: StoreContext) {
  return tx.locksRows ? sql`for update skip locked` : sql``
}
