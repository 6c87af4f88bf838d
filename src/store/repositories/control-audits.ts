// What the control-plane audit lane needs beyond the generic outbox: its two claims, the settle that
// writes the audit row in the same transaction, the ack round's compare-and-set writes, and the
// question whether a row's Worker is retired.
//
// Recovery round: a control row is the command's own while it runs (reserved_by). The sweep takes a
// pending row only once it was attempted, or nobody reserved it, or its request grace has passed,
// and a leased row once its lease expired — in both cases the outcome of its mutation is unknown.
//
// Ack round: a `completed` row whose receipt is not yet acknowledged keeps next_attempt_at set (the
// ack is due then); a runner claims it with a stamp (claimed_by, claim_expires_at in whole seconds)
// that holds it for control_audit.lease_seconds and keys the compare-and-set of its writes.
import type {StoreContext} from '../context.js'
import {unreserved, type ClaimStamp} from '../outbox-states.js'
import {claimAckStamps, claimLeases, completeControlLease, endAckClaim} from '../outbox/statements.js'
import type {RetryLaterOptions} from '../outbox/types.js'
import type {OutboxRow} from '../schema.js'
import {AuditRepository, type AuditEntryInput} from './audit.js'

/** The audit action whose success row marks a department's Worker retired (../../engine/retire/audit.ts). */
const WORKER_RETIRED_ACTION = 'department.worker_retired'

export interface ControlClaimOptions {
  scope: string
  owner: string
  limit: number
  leaseSeconds: number
  /** A pending row its command still owns is left alone this long after enqueue. */
  graceSeconds: number
}

export class ControlAuditRepository {
  constructor(private readonly ctx: StoreContext) {}

  /** Leases control rows whose mutation outcome is unknown, oldest due first (a fresh token each; no attempt counted). */
  async claimRecoverable(options: ControlClaimOptions): Promise<OutboxRow[]> {
    const {graceSeconds, ...claim} = options
    return this.ctx.write((tx) => claimLeases(tx, {...claim, operation: 'control_audit', pendingAlso: (now) => unreserved(now, graceSeconds)}))
  }

  /**
   * Settles a leased row `completed` with its audit row, atomically, counting the receipt read that
   * led here as an attempt; the row's ack is due now, its run of waits over. The
   * settling runner's claim on it expires at once — the ack round may take the row right away — and
   * only keys its compare-and-set: the stamp returned lets it acknowledge the receipt itself unless
   * the ack round got there first. undefined = the lease was lost (nothing written). Throws the audit
   * conflict when the id is already bound to different facts (nothing written either).
   */
  async complete(id: string, token: string, audit: AuditEntryInput): Promise<{stamp: ClaimStamp; attempts: number; waits: number} | undefined> {
    return this.ctx.atomic(async (tx) => {
      const completed = await completeControlLease(tx, {id, token})
      if (completed) await new AuditRepository(tx).append(audit)
      return completed
    })
  }

  /** Claims completed rows whose acknowledgement is due: the claim holds them for `leaseSeconds`. */
  async claimAcks(options: Omit<ControlClaimOptions, 'graceSeconds'>): Promise<OutboxRow[]> {
    return this.ctx.write((tx) => claimAckStamps(tx, options))
  }

  /**
   * Ends the ack work of a completed row: acknowledged (no code; the ack was an attempt), or stopped
   * for good with a code (`worker_retired`). false = another runner's claim holds the row.
   */
  async stopAcks(stamp: ClaimStamp, stop: {errorCode: string | null; error: string | null; attempted: boolean}): Promise<boolean> {
    return this.ctx.write((tx) => endAckClaim(tx, stamp, {...stop, nextAttemptAt: null}))
  }

  /** A failed ack waits until `nextAttemptAt`; null (the engine's retry rule: attempts ran out) stops it (`failed`). */
  async retryAck(stamp: ClaimStamp, retry: Omit<RetryLaterOptions, 'deferred'>): Promise<'rescheduled' | 'failed' | 'lost'> {
    const {nextAttemptAt, errorCode, error, waits, attempted} = retry
    const ended = await this.ctx.write((tx) => endAckClaim(tx, stamp, {nextAttemptAt, errorCode, error, waits, attempted}))
    if (!ended) return 'lost'
    return nextAttemptAt === null ? 'failed' : 'rescheduled'
  }

  /**
   * Retired when its department is soft-deleted and a successful
   * `department.worker_retired` row exists for it, or when its company was hard-deleted (no
   * department row with that id in any company, and no Worker row).
   */
  async workerRetired(workerId: string, departmentId: string): Promise<boolean> {
    const department = await this.ctx.db.selectFrom('departments').select('deleted_at').where('id', '=', departmentId).executeTakeFirst()
    if (!department) {
      const worker = await this.ctx.db.selectFrom('edge_workers').select('id').where('id', '=', workerId).executeTakeFirst()
      return worker === undefined
    }
    if (department.deleted_at === null) return false
    const retired = await this.ctx.db
      .selectFrom('edge_worker_audit_logs')
      .select('id')
      .where('action', '=', WORKER_RETIRED_ACTION)
      .where('resource_id', '=', workerId)
      .where('result', '=', 'success')
      .executeTakeFirst()
    return retired !== undefined
  }
}
