// The inputs and answers of the outbox's statements and repository (./statements.ts, ./repository.ts).
import type {RawBuilder} from 'kysely'
import type {SettledOutboxStatus, WaitingStatus} from '../outbox-states.js'
import type {JsonObject, OutboxOperation, OutboxRow, OutboxStatus} from '../schema.js'

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

/** A lease a runner holds on a row: every write it makes on the row matches the token. */
export interface HeldLease {
  id: string
  token: string
}

export interface LeaseClaim {
  operation: OutboxOperation
  /** The kit scope (`dispatch_namespace`) whose rows this runner may take. */
  scope: string
  owner: string
  limit: number
  leaseSeconds: number
  /** What a due pending row must also meet at the claim's moment (e.g. a sweep's grace for reservations). */
  pendingAlso?: (now: number) => RawBuilder<boolean>
}

/**
 * How a write that ends a lease leaves the row. An absent `errorCode`, `error` or `waits` leaves
 * that column as it is.
 */
export interface LeaseEnding {
  status: Exclude<OutboxStatus, 'leased'>
  /** When the row's next piece of work is due; null = none. */
  nextAttemptAt: number | null
  errorCode?: string | null
  error?: string | null
  waits?: number
  /** The runner asked the host (or the artifact store) about the row in this run: one attempt more. */
  attempted: boolean
}

/** How the write that ends an ack round's claim leaves the row (an absent `waits` stays as it is). */
export interface AckEnding {
  nextAttemptAt: number | null
  errorCode: string | null
  error: string | null
  waits?: number
  /** The runner asked the host in this run: one attempt more. */
  attempted: boolean
}

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

/** A sweep's scope filter on rows that wait for a host they could not reach (their last error code). */
export interface HostWait {
  scope: string
  operation: OutboxOperation
  errorCode: string
}

export interface EnqueueResult {
  row: OutboxRow
  /** true: a row with this dedupe key already existed and is returned unchanged; nothing was written. */
  duplicate: boolean
}

export type ClaimOptions = Omit<LeaseClaim, 'pendingAlso'>

export type LeaseDisposition = 'acquired' | 'terminal' | 'inflight' | 'not_due' | 'wrong_scope'
export type LeaseByIdResult = {disposition: LeaseDisposition; row: OutboxRow} | {disposition: 'missing'; row: null}

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
