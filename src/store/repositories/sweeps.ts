// What the reconcile lanes need beyond the generic outbox claim: the deploy sweeps' claims, the
// writes of a pass on the rows it holds, artifact references, and the count of rows left for an
// operator.
//
// A deploy sweep leases the rows it claims, in the claiming statement: on-prem, publishing a row
// means running its deploy task in this process, so the claim takes the task's lease itself (a fresh
// token; no attempt counted — the task counts one when it asks the host) and hands it to the task — one write per row fewer than a claim stamp
// followed by a lease. A runner that stalls past its lease finds the row taken over under a new
// token and loses every later write: the token is the compare-and-set. The pass keeps the leases of
// the rows it has not started yet alive, and hands back those it does not get to. The predicates (due, unclaimed, unreserved, …): ../outbox-states.ts.
import {sql} from 'kysely'
import type {StoreContext} from '../context.js'
import {due, unreserved, type WaitingStatus} from '../outbox-states.js'
import {claimDeferredLeases, claimLeases, endLease, renewLeases, settleLease, waitingForHostRows, wakeHostWaits} from '../outbox/statements.js'
import type {HeldLease, HostWait} from '../outbox/types.js'
import type {OutboxOperation, OutboxRow} from '../schema.js'
import {settleUnfinishedVersion} from './workers.js'
import {supersedeLeased, type SupersededRow} from './supersede.js'

/** Leases renewed per statement. */
const RENEWAL_SLICE = 500
/** Digests looked up per statement. */
const REFERENCE_SLICE = 500

export interface RecoverableClaimOptions {
  scope: string
  owner: string
  limit: number
  /** A never-attempted row its enqueuer reserved stays theirs this long after enqueue. */
  graceSeconds: number
  leaseSeconds: number
}

export interface DeferredClaimOptions {
  scope: string
  owner: string
  leaseSeconds: number
}

/** How a lane hands back a row it leased and did not work on: its status, and the reason it waits (unchanged when absent). */
export interface HandBack {
  status: WaitingStatus
  errorCode?: string
  /** When a lane may take the row again; now by default. */
  nextAttemptAt?: number
}

export class SweepRepository {
  constructor(private readonly ctx: StoreContext) {}

  /**
   * Leases up to `limit` deploy rows of the scope that need a dispatcher, oldest due first:
   * - pending and due, no older sweep's claim stamp within its cooldown (rows stamped before the
   *   claim leased), and for a row never attempted, no reservation within the grace since enqueue (a
   *   waiting `deploy` dispatches it; past the grace it has stalled and a sweep takes it over);
   * - leased with an expired lease (its runner died or stalled).
   */
  async claimRecoverableDeployments(options: RecoverableClaimOptions): Promise<OutboxRow[]> {
    const {graceSeconds, ...claim} = options
    return this.ctx.write((tx) => claimLeases(tx, {...claim, operation: 'deploy', pendingAlso: (now) => unreserved(now, graceSeconds)}))
  }

  /**
   * Leases every due deferred deploy of the scope (no batch cap), oldest first. The lane claims only
   * while the gate is open, so the dispatch is accepted: the reason the row waited is cleared.
   */
  async claimDeferredDeployments(options: DeferredClaimOptions): Promise<OutboxRow[]> {
    return this.ctx.write((tx) => claimDeferredLeases(tx, options))
  }

  /**
   * Extends, from now, the leases a pass holds on rows it has not started yet (a statement per
   * RENEWAL_SLICE rows). A lease that ran out and was taken over is not renewed: the token no longer
   * matches, and the task finds it lost.
   */
  async renewHeld(leases: readonly HeldLease[], leaseSeconds: number): Promise<void> {
    // In slices: the deferred lane's claim has no cap, and a statement has a bounded number of parameters.
    for (let start = 0; start < leases.length; start += RENEWAL_SLICE) {
      await this.ctx.write((tx) => renewLeases(tx, leases.slice(start, start + RENEWAL_SLICE), leaseSeconds))
    }
  }

  /**
   * Quarantines a leased deploy whose row cannot be dispatched, in one transaction (lock order
   * outbox → worker → version): the row settles, an `uncertain` one pauses its Worker, and the
   * version takes the outcome unless it is already past deploying — a deployed version is never
   * downgraded. false = the lease was lost and nothing changed.
   */
  async quarantine(
    lease: HeldLease,
    outcome: {status: 'failed' | 'uncertain'; errorCode: string; error: string; workerId: string | null; versionId: string | null},
  ): Promise<boolean> {
    return this.ctx.atomic(async (tx) => {
      const settled = await settleLease(tx, lease, {status: outcome.status, errorCode: outcome.errorCode, error: outcome.error})
      if (!settled) return false
      const now = this.ctx.now()
      if (outcome.status === 'uncertain' && outcome.workerId) {
        await tx.db
          .updateTable('edge_workers')
          .set({status: 'paused', updated_at: now})
          .where('id', '=', outcome.workerId)
          .where('status', '!=', 'retired')
          .execute()
      }
      if (outcome.versionId) await settleUnfinishedVersion(tx, outcome.versionId, outcome.status, now)
      return true
    })
  }

  /** Settles, in one transaction, the leased rows of a claim that yield to a newer deploy (./supersede.ts). */
  async supersedeLeased(claimed: readonly {lease: HeldLease; versionId: string | null}[]): Promise<SupersededRow[]> {
    return supersedeLeased(this.ctx, claimed)
  }

  /** Which of these Worker ids still have a row. */
  async existingWorkerIds(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set()
    const rows = await this.ctx.db
      .selectFrom('edge_workers')
      .select('id')
      .where('id', 'in', [...new Set(ids)])
      .execute()
    return new Set(rows.map((row) => row.id))
  }

  /**
   * Artifact key → the ids of every version referencing it, as project or bundle, sorted. Keys name
   * content (SHA-256), so one key can serve versions of several tenants: every version counts.
   */
  async artifactReferences(keys: readonly string[]): Promise<Map<string, string[]>> {
    const references = new Map<string, string[]>()
    if (keys.length === 0) return references
    const unique = [...new Set(keys)]
    const rows = await this.ctx.db
      .selectFrom('edge_worker_versions')
      .select(['id', 'project_artifact_key', 'bundle_artifact_key'])
      .where((eb) => eb.or([eb('project_artifact_key', 'in', unique), eb('bundle_artifact_key', 'in', unique)]))
      .orderBy('id')
      .execute()
    for (const row of rows) {
      for (const key of new Set([row.project_artifact_key, row.bundle_artifact_key])) {
        if (unique.includes(key)) references.set(key, [...(references.get(key) ?? []), row.id])
      }
    }
    return references
  }

  /**
   * Asset SHA-256 → the ids of every version serving it, sorted; a version recorded as serving every
   * asset object (`*`, committed before edge_worker_version_assets) is counted for each digest.
   */
  async assetReferences(digests: readonly string[]): Promise<Map<string, string[]>> {
    const references = new Map<string, string[]>()
    const unique = [...new Set(digests)]
    if (unique.length === 0) return references
    const every = await this.ctx.db.selectFrom('edge_worker_version_assets').select('version_id').where('asset_digest', '=', '*').execute()
    for (let start = 0; start < unique.length; start += REFERENCE_SLICE) {
      const rows = await this.ctx.db
        .selectFrom('edge_worker_version_assets')
        .select(['version_id', 'asset_digest'])
        .where('asset_digest', 'in', unique.slice(start, start + REFERENCE_SLICE))
        .execute()
      for (const row of rows) references.set(row.asset_digest, [...(references.get(row.asset_digest) ?? []), row.version_id])
    }
    if (every.length > 0) for (const digest of unique) references.set(digest, [...(references.get(digest) ?? []), ...every.map((row) => row.version_id)])
    for (const owners of references.values()) owners.sort()
    return references
  }

  /**
   * Gives back a leased row a lane claimed but did not work on: due now, and `back` — pending, or
   * deferred again with the reason it waits, for the deferred lane. false = the lease was lost.
   */
  async releaseLease(id: string, token: string, back: HandBack = {status: 'pending'}): Promise<boolean> {
    return this.ctx.write((tx) => {
      const now = tx.now()
      return endLease(tx, {id, token}, {status: back.status, errorCode: back.errorCode, nextAttemptAt: back.nextAttemptAt ?? now, attempted: false}, now)
    })
  }

  /**
   * Pending deploys of the scope the recovery sweep may not claim yet — a backoff not over, a claim
   * within its cooldown, or a reservation still within its grace — with the moment the first of
   * them becomes claimable (the rule of claimRecoverableDeployments).
   */
  async waitingDeployments(options: {scope: string; graceSeconds: number}): Promise<{count: number; nextDueAt: number | null}> {
    const now = this.ctx.now()
    const graceMs = options.graceSeconds * 1000
    const rows = await this.ctx.db
      .selectFrom('edge_worker_outbox')
      .select(['next_attempt_at', 'claim_expires_at', 'reserved_by', 'created_at'])
      .where('operation', '=', 'deploy')
      .where('dispatch_namespace', '=', options.scope)
      .where('status', '=', 'pending')
      .where(sql<boolean>`not (${due(now)} and ${unreserved(now, options.graceSeconds)})`)
      .execute()
    const dueAt = rows.map((row) =>
      Math.max(Number(row.next_attempt_at), Number(row.claim_expires_at ?? 0), row.reserved_by !== null ? Number(row.created_at) + graceMs : 0),
    )
    return {count: rows.length, nextDueAt: dueAt.length > 0 ? Math.min(...dueAt) : null}
  }

  /**
   * Pending rows of the operation and scope that wait, not yet due, for a host they could not reach
   * (their last error says so): a pass that finds the host answering makes them due now.
   */
  async waitingForHost(wait: HostWait): Promise<boolean> {
    const row = await this.ctx.db.selectFrom('edge_worker_outbox').select('id').where(waitingForHostRows(wait, this.ctx.now())).limit(1).executeTakeFirst()
    return row !== undefined
  }

  /** Makes the rows `waitingForHost` finds due now (their run of waits stays: the ladder goes on if the host fails again). Returns how many. */
  async wakeWaitingForHost(wait: HostWait): Promise<number> {
    return this.ctx.write((tx) => wakeHostWaits(tx, wait))
  }

  /** Rows of these operations in the scope that ended `failed` or `uncertain` and wait for an operator. */
  async countUnsettled(scope: string, operations: readonly OutboxOperation[]): Promise<{failed: number; uncertain: number}> {
    const counts = {failed: 0, uncertain: 0}
    if (operations.length === 0) return counts
    const rows = await this.ctx.db
      .selectFrom('edge_worker_outbox')
      .select(['status', (eb) => eb.fn.countAll<number | string>().as('count')])
      .where('operation', 'in', [...operations])
      .where('dispatch_namespace', '=', scope)
      .where('status', 'in', ['failed', 'uncertain'])
      .groupBy('status')
      .execute()
    for (const row of rows) counts[row.status as keyof typeof counts] = Number(row.count)
    return counts
  }
}
