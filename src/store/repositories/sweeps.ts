// What the reconcile lanes need beyond the generic outbox claim: the deploy sweeps' claims with a
// compare-and-set stamp, the CAS writes that follow them, artifact references, and the count of rows
// left for an operator.
//
// A deploy sweep does not lease the rows it claims: it *stamps* them — claimed_by = the claiming
// runner, claim_expires_at = a cooldown deadline in whole seconds — and the deploy task leases each
// through that stamp (leaseStamped) when it gets to it. Every later write of the sweep is a
// compare-and-set on (status, claimed_by, claim_expires_at): a publisher that stalled past its
// cooldown finds the row re-stamped by a newer claim (or leased, which ends the claim) and loses:
// its write matches nothing. The predicates (due, unclaimed, unreserved, …): ../outbox-states.ts.
import {sql} from 'kysely'
import type {StoreContext} from '../context.js'
import {carriesClaim, claimAssignments, due, liveLease, unreserved, type ClaimStamp} from '../outbox-states.js'
import {settleUnfinishedVersion} from './deployments.js'
import {claimableIds, leaseAssignments, refusalOf, type LeaseByIdResult} from './outbox.js'
import {supersedeStamped, type SupersededRow} from './supersede.js'
import {parseJsonObject, type OutboxOperation, type OutboxRow, type OutboxTable} from '../schema.js'

export interface RecoverableClaimOptions {
  scope: string
  owner: string
  limit: number
  /** A never-attempted row its enqueuer reserved stays theirs this long after enqueue. */
  graceSeconds: number
  cooldownSeconds: number
}

export interface DeferredClaimOptions {
  scope: string
  owner: string
  cooldownSeconds: number
}

export class SweepRepository {
  constructor(private readonly ctx: StoreContext) {}

  /**
   * Stamps up to `limit` deploy rows of the scope that need a dispatcher, oldest due first:
   * - pending, due, and nobody holds them: no claim within its cooldown (a sweep that published the
   *   row is leasing it right now), and for a row never attempted, no reservation within the grace
   *   since enqueue (a waiting `deploy` dispatches it; past the grace it has stalled and a sweep
   *   takes it over);
   * - leased with an expired lease, once the cooldown of any earlier claim is over.
   * A never-attempted row is reserved to the sweep that claims it first, as to an enqueuer: if that
   * sweep dies before leasing, the row waits out the grace, not just the cooldown.
   */
  async claimRecoverableDeployments(options: RecoverableClaimOptions): Promise<OutboxRow[]> {
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const {rows} = await sql<OutboxTable>`
        update edge_worker_outbox
        set ${claimAssignments(options.owner, now, options.cooldownSeconds)},
          reserved_by = case when attempts = 0 then coalesce(reserved_by, ${options.owner}) else reserved_by end
        where id in (${claimableIds(this.ctx, {
          operation: 'deploy',
          scope: options.scope,
          limit: options.limit,
          now,
          pendingAlso: unreserved(now, options.graceSeconds),
        })})
        returning *`.execute(db)
      return rows.map(toOutboxRow).sort(oldestFirst)
    })
  }

  /** Stamps every due deferred deploy of the scope (no batch cap), oldest first. */
  async claimDeferredDeployments(options: DeferredClaimOptions): Promise<OutboxRow[]> {
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const {rows} = await sql<OutboxTable>`
        update edge_worker_outbox
        set ${claimAssignments(options.owner, now, options.cooldownSeconds)}
        where id in (
          select id from edge_worker_outbox
          where operation = 'deploy' and dispatch_namespace = ${options.scope} and ${due(now, 'deferred')}
          order by created_at, id
          ${this.skipLocked()}
        )
        returning *`.execute(db)
      return rows.map(toOutboxRow).sort(oldestFirst)
    })
  }

  /**
   * Publishes a stamped row to its in-process dispatcher by leasing it to the stamp's owner, in one
   * statement: the stamp's compare-and-set and the lease are one check (the deploy task's lease step
   * for a row a sweep claimed). A deferred row drops the reason it waited (`edge_host_fenced`): the
   * dispatch is accepted. An expired lease whose holder renewed it since the claim stays the holder's.
   * A refusal is explained by a read of the row.
   */
  async leaseStamped(stamp: ClaimStamp, options: {scope: string; leaseSeconds: number}): Promise<LeaseByIdResult> {
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const accepted = stamp.status === 'deferred' ? sql`, last_error_code = null, last_error = null` : sql``
      const {rows} = await sql<OutboxTable>`
        update edge_worker_outbox
        set ${leaseAssignments({owner: stamp.claimed_by, leaseSeconds: options.leaseSeconds}, now)} ${accepted}
        where ${carriesClaim(stamp)} and dispatch_namespace = ${options.scope} and not ${liveLease(now)}
        returning *`.execute(db)
      if (rows[0]) return {disposition: 'acquired', row: toOutboxRow(rows[0])}
      const row = await db.selectFrom('edge_worker_outbox').selectAll().where('id', '=', stamp.id).executeTakeFirst()
      if (!row) return {disposition: 'missing', row: null}
      const refusal = refusalOf(row, options.scope, now)
      return {disposition: refusal === 'not_due' ? 'restamped' : refusal, row: toOutboxRow(row)}
    })
  }

  /**
   * Hands a pending or deferred row this sweep stamped but did not get to run back to the passes, as
   * it was claimed but held by nobody (no claim, no reservation) and due now. An expired lease needs
   * nothing: it is claimable again when the claim's cooldown ends. false = a newer claim holds the row.
   */
  async release(stamp: ClaimStamp): Promise<boolean> {
    if (stamp.status === 'leased') return false
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const result = await this.matching(db, stamp)
        .set({claimed_by: null, claim_expires_at: null, reserved_by: null, next_attempt_at: now, updated_at: now})
        .executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }

  /**
   * Settles a stamped row `failed` or `uncertain` without touching anything else (e.g.
   * `worker_deleted`: the Worker and its versions are gone). false = a newer claim won.
   */
  async settleStamped(stamp: ClaimStamp, outcome: {status: 'failed' | 'uncertain'; errorCode: string; error: string}): Promise<boolean> {
    return this.ctx.write(async (tx) => this.settleStampedIn(tx, stamp, outcome))
  }

  /**
   * Quarantines a stamped deploy whose row cannot be dispatched, in one transaction (lock order
   * outbox → worker → version): the row settles, an `uncertain` one pauses its Worker, and the
   * version takes the outcome unless it is already past deploying — a deployed version is never
   * downgraded. false = a newer claim won and nothing changed.
   */
  async quarantine(
    stamp: ClaimStamp,
    outcome: {status: 'failed' | 'uncertain'; errorCode: string; error: string; workerId: string | null; versionId: string | null},
  ): Promise<boolean> {
    return this.ctx.atomic(async (tx) => {
      if (!(await this.settleStampedIn(tx, stamp, outcome))) return false
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

  /** Settles, in one transaction, the stamped rows of a claim that yield to a newer deploy (./supersede.ts). */
  async supersedeStamped(claimed: readonly {stamp: ClaimStamp; versionId: string | null}[]): Promise<SupersededRow[]> {
    return supersedeStamped(this.ctx, claimed)
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
   * Gives back a leased row a lane claimed but did not work on: pending, due now, and the claim's
   * attempt uncounted (nothing was attempted). false = the lease was lost.
   */
  async releaseLease(id: string, token: string): Promise<boolean> {
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const result = await db
        .updateTable('edge_worker_outbox')
        .set((eb) => ({
          status: 'pending',
          lease_token: null,
          lease_expires_at: null,
          next_attempt_at: now,
          attempts: eb('attempts', '-', 1),
          updated_at: now,
        }))
        .where('id', '=', id)
        .where('lease_token', '=', token)
        .executeTakeFirst()
      return result.numUpdatedRows > 0n
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
      .select(['next_attempt_at', 'claim_expires_at', 'reserved_by', 'created_at', 'attempts'])
      .where('operation', '=', 'deploy')
      .where('dispatch_namespace', '=', options.scope)
      .where('status', '=', 'pending')
      .where(sql<boolean>`not (${due(now)} and ${unreserved(now, options.graceSeconds)})`)
      .execute()
    const dueAt = rows.map((row) =>
      Math.max(
        Number(row.next_attempt_at),
        Number(row.claim_expires_at ?? 0),
        row.reserved_by !== null && row.attempts === 0 ? Number(row.created_at) + graceMs : 0,
      ),
    )
    return {count: rows.length, nextDueAt: dueAt.length > 0 ? Math.min(...dueAt) : null}
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

  private async settleStampedIn(
    tx: StoreContext,
    stamp: ClaimStamp,
    outcome: {status: 'failed' | 'uncertain'; errorCode: string; error: string},
  ): Promise<boolean> {
    const result = await this.matching(tx.db, stamp)
      .set({
        status: outcome.status,
        lease_token: null,
        lease_expires_at: null,
        next_attempt_at: null,
        claimed_by: null,
        claim_expires_at: null,
        last_error_code: outcome.errorCode,
        last_error: outcome.error,
        updated_at: this.ctx.now(),
      })
      .executeTakeFirst()
    return result.numUpdatedRows > 0n
  }

  /** An update that applies only while the row still carries exactly the stamp this sweep wrote (the compare-and-set). */
  private matching(db: StoreContext['db'], stamp: ClaimStamp) {
    return db.updateTable('edge_worker_outbox').where(carriesClaim(stamp))
  }

  private skipLocked() {
    return this.ctx.locksRows ? sql`for update skip locked` : sql``
  }
}

/** The stamp a claimed row carries (the claim just wrote it). */
export function stampOf(row: OutboxRow): ClaimStamp {
  if (row.claimed_by === null || row.claim_expires_at === null) throw new Error(`outbox row ${row.id} carries no sweep stamp`)
  return {id: row.id, status: row.status, claimed_by: row.claimed_by, claim_expires_at: row.claim_expires_at}
}

const oldestFirst = (a: OutboxRow, b: OutboxRow) => a.created_at - b.created_at || a.id.localeCompare(b.id)

function toOutboxRow(row: OutboxTable): OutboxRow {
  return {...row, payload: parseJsonObject(row.payload)}
}
