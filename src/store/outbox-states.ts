// The outbox state machine, in one place: which statuses exist, which are finished, which moves
// between them the code makes (OUTBOX_TRANSITIONS, checked against docs/architecture.md's diagram by
// test/unit/store/outbox-states.test.ts), and the SQL predicates every sweep, the status view and the
// row actions share (due, claimable, live lease, claimed, reserved).
//
// Columns, one meaning each (migration 0004_outbox_state_columns):
// - status — the state; `deferred` is a deploy held back by a backup fence;
// - lease_owner, lease_token, lease_expires_at — the task's lease (lease_owner stays as who last held it);
// - next_attempt_at — when the row's next piece of work is due;
// - claimed_by, claim_expires_at — a sweep's claim stamp: held for its cooldown, the key of its compare-and-set
//   (the control-audit ack round's; the deploy sweeps lease what they claim, and honour older stamps until they end);
// - reserved_by — the enqueuer that dispatches the row itself, holding it for a grace after enqueue until it leases it;
// - attempts — the times the host was asked; waits — consecutive waits, the next wait's backoff step (../../engine/retry.ts).
import {sql} from 'kysely'
import type {OutboxRow, OutboxStatus} from './schema.js'

/** Settled by the row's runner: no lane claims the row again and no lease can be taken on it. */
export const SETTLED_OUTBOX_STATUSES = ['completed', 'failed', 'uncertain', 'cancelled'] as const
export type SettledOutboxStatus = (typeof SETTLED_OUTBOX_STATUSES)[number]
/** Settled and done: not even an operator retries or cancels it. */
export const FINISHED_OUTBOX_STATUSES = ['completed', 'cancelled'] as const
/** Settled without success: waits for an operator (retry or cancel). */
export const ATTENTION_OUTBOX_STATUSES = ['failed', 'uncertain'] as const
export type AttentionStatus = (typeof ATTENTION_OUTBOX_STATUSES)[number]
/** Waiting for a lane to lease it once due: `pending` for the lane of its operation, `deferred` for the deferred lane. */
export const WAITING_OUTBOX_STATUSES = ['pending', 'deferred'] as const
export type WaitingStatus = (typeof WAITING_OUTBOX_STATUSES)[number]
/** Everything not finished: what an operator may still have to act on. */
export const OPEN_OUTBOX_STATUSES = [...WAITING_OUTBOX_STATUSES, 'leased', ...ATTENTION_OUTBOX_STATUSES] as const

export const isSettled = (status: OutboxStatus): status is SettledOutboxStatus => (SETTLED_OUTBOX_STATUSES as readonly string[]).includes(status)
export const isFinished = (status: OutboxStatus): boolean => (FINISHED_OUTBOX_STATUSES as readonly string[]).includes(status)

/** One move of the state machine: who makes it, from which status to which. */
export interface OutboxTransition {
  from: OutboxStatus | 'new'
  to: OutboxStatus
  by: string
}

/** Every move the code makes; the diagram in docs/architecture.md is checked against this list. */
export const OUTBOX_TRANSITIONS: readonly OutboxTransition[] = [
  {from: 'new', to: 'pending', by: 'enqueue'},
  {from: 'new', to: 'deferred', by: 'enqueue (a deploy while a backup fence is open)'},
  {from: 'pending', to: 'leased', by: "claim / leaseById / a deploy sweep's claim (due)"},
  {from: 'deferred', to: 'leased', by: "the deferred lane's claim, once the fence ended"},
  {from: 'leased', to: 'leased', by: "claim / leaseById / a deploy sweep's claim (lease expired; new token)"},
  {from: 'leased', to: 'pending', by: 'retryLater (due at the engine-chosen time) / releaseLease / outbox retry (lease expired)'},
  {from: 'leased', to: 'deferred', by: 'retryLater (the host refused: fenced) / releaseLease (the deferred lane hands it back)'},
  {from: 'leased', to: 'completed', by: 'settle'},
  {from: 'leased', to: 'failed', by: 'settle / retryLater (attempts ran out) / quarantine'},
  {from: 'leased', to: 'uncertain', by: 'settle / quarantine'},
  {from: 'leased', to: 'cancelled', by: 'settle (deploy_superseded, artifact in use) / outbox cancel (lease expired)'},
  {from: 'pending', to: 'pending', by: 'outbox retry (due now)'},
  {from: 'deferred', to: 'deferred', by: 'outbox retry (due now)'},
  {from: 'pending', to: 'cancelled', by: 'outbox cancel / commitVersion (artifact adopted)'},
  {from: 'deferred', to: 'cancelled', by: 'outbox cancel'},
  {from: 'failed', to: 'pending', by: 'outbox retry'},
  {from: 'uncertain', to: 'pending', by: 'outbox retry'},
  {from: 'failed', to: 'cancelled', by: 'outbox cancel'},
  {from: 'uncertain', to: 'cancelled', by: 'outbox cancel'},
]

/** No sweep's claim holds the row: never claimed, the claim ended, or its cooldown is over. */
export function unclaimed(now: number) {
  return sql<boolean>`(claim_expires_at is null or claim_expires_at <= ${now})`
}

/**
 * Its enqueuer's reservation no longer holds the row: there is none (a lease ended it), or the grace
 * since enqueue has passed (the enqueuer stalled; a sweep takes the row over).
 */
export function unreserved(now: number, graceSeconds: number) {
  return sql<boolean>`(reserved_by is null or created_at <= ${now - graceSeconds * 1000})`
}

/** A row whose next piece of work is due and that no claim holds (a waiting row; a completed control row's ack). */
export function due(now: number, status: WaitingStatus | 'completed' = 'pending') {
  return sql<boolean>`(status = ${sql.lit(status)} and next_attempt_at <= ${now} and ${unclaimed(now)})`
}

/** A leased row whose lease ran out (its holder died or stalled) and that no claim holds. */
export function leaseExpired(now: number) {
  return sql<boolean>`(status = 'leased' and lease_expires_at <= ${now} and ${unclaimed(now)})`
}

/** A row a lease may be taken on now: pending and due, or leased with its lease expired. */
export function claimable(now: number) {
  return sql<boolean>`(${due(now)} or ${leaseExpired(now)})`
}

/** A row some runner holds right now: never taken from it, not by a sweep nor by an operator. */
export function liveLease(now: number) {
  return sql<boolean>`(status = 'leased' and lease_expires_at > ${now})`
}

/** The same rule as `liveLease`, for a row already read. */
export function holdsLiveLease(row: {status: OutboxStatus; lease_expires_at: number | null}, now: number): boolean {
  return row.status === 'leased' && row.lease_expires_at !== null && row.lease_expires_at > now
}

/** What a claim wrote on a row; every later write of its claimer must find exactly this (compare-and-set). */
export interface ClaimStamp {
  id: string
  status: OutboxStatus
  claimed_by: string
  claim_expires_at: number
}

/** The stamp a claimed row carries (the claim just wrote it). */
export function stampOf(row: OutboxRow): ClaimStamp {
  if (row.claimed_by === null || row.claim_expires_at === null) throw new Error(`outbox row ${row.id} carries no sweep stamp`)
  return {id: row.id, status: row.status, claimed_by: row.claimed_by, claim_expires_at: row.claim_expires_at}
}

/** The row still carries exactly this stamp: no newer claim took it, no lease or settle moved it. */
export function carriesClaim(stamp: ClaimStamp) {
  return sql<boolean>`(id = ${stamp.id} and status = ${stamp.status} and claimed_by = ${stamp.claimed_by} and claim_expires_at = ${stamp.claim_expires_at})`
}

/** The end of a claim's cooldown, rounded to whole seconds. */
function cooldownStamp(now: number, cooldownSeconds: number): number {
  return (Math.floor(now / 1000) + cooldownSeconds) * 1000
}

/** The SET clause of a claim: `owner` holds the row until the cooldown ends. */
export function claimAssignments(owner: string, now: number, cooldownSeconds: number) {
  return sql`claimed_by = ${owner}, claim_expires_at = ${cooldownStamp(now, cooldownSeconds)}, updated_at = ${now}`
}

/** The SET clause that ends a claim (the row was leased). */
export const endClaim = sql`claimed_by = null, claim_expires_at = null`
