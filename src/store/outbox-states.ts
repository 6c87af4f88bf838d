// The outbox state machine, in one place: which statuses exist, which are finished, which moves
// between them the code makes (OUTBOX_TRANSITIONS, checked against docs/architecture.md's diagram by
// test/unit/outbox-states.test.ts), and the SQL predicates every sweep, the status view and the row
// actions share (claimable, live lease).
import {sql} from 'kysely'
import type {OutboxStatus} from './schema.js'

/** Settled by the row's runner: no lane claims the row again and no lease can be taken on it. */
export const SETTLED_OUTBOX_STATUSES = ['completed', 'failed', 'uncertain', 'cancelled'] as const
export type SettledOutboxStatus = (typeof SETTLED_OUTBOX_STATUSES)[number]
/** Settled and done: not even an operator retries or cancels it. */
export const FINISHED_OUTBOX_STATUSES = ['completed', 'cancelled'] as const
/** Settled without success: waits for an operator (retry or cancel). */
export const ATTENTION_OUTBOX_STATUSES = ['failed', 'uncertain'] as const
export type AttentionStatus = (typeof ATTENTION_OUTBOX_STATUSES)[number]
/** Everything not finished: what an operator may still have to act on. */
export const OPEN_OUTBOX_STATUSES = ['pending', 'leased', ...ATTENTION_OUTBOX_STATUSES] as const

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
  {from: 'pending', to: 'leased', by: 'claim / leaseById / leaseStamped (due)'},
  {from: 'leased', to: 'leased', by: 'claim / leaseById / leaseStamped (lease expired; new token)'},
  {from: 'leased', to: 'pending', by: 'retryLater (due at the engine-chosen time) / releaseLease / outbox retry (lease expired)'},
  {from: 'leased', to: 'completed', by: 'settle'},
  {from: 'leased', to: 'failed', by: 'settle / retryLater (attempts ran out)'},
  {from: 'leased', to: 'uncertain', by: 'settle'},
  {from: 'leased', to: 'cancelled', by: 'settle (deploy_superseded, artifact in use) / outbox cancel (lease expired)'},
  {from: 'pending', to: 'pending', by: 'sweep stamp / release / outbox retry (due now)'},
  {from: 'pending', to: 'failed', by: 'settleStamped / quarantine'},
  {from: 'pending', to: 'uncertain', by: 'quarantine'},
  {from: 'pending', to: 'cancelled', by: 'outbox cancel'},
  {from: 'failed', to: 'pending', by: 'outbox retry'},
  {from: 'uncertain', to: 'pending', by: 'outbox retry'},
  {from: 'failed', to: 'cancelled', by: 'outbox cancel'},
  {from: 'uncertain', to: 'cancelled', by: 'outbox cancel'},
]

/** A row a lease may be taken on now: pending and due, or leased with its lease expired. */
export function claimable(now: number) {
  return sql<boolean>`((status = 'pending' and next_attempt_at <= ${now}) or (status = 'leased' and lease_expires_at <= ${now}))`
}

/** A row some runner holds right now: never taken from it, not by a sweep nor by an operator. */
export function liveLease(now: number) {
  return sql<boolean>`(status = 'leased' and lease_expires_at > ${now})`
}

/** The same rule as `liveLease`, for a row already read. */
export function holdsLiveLease(row: {status: OutboxStatus; lease_expires_at: number | null}, now: number): boolean {
  return row.status === 'leased' && row.lease_expires_at !== null && row.lease_expires_at > now
}
