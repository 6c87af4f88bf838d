// What the reconcile lanes need beyond the generic outbox claim: the deploy sweeps' claims with a
// compare-and-set stamp, the CAS writes that follow them, artifact references, and the count of rows
// left for an operator.
//
// A deploy sweep does not lease the rows it claims: it *stamps* them — lease_owner = the claiming
// runner, next_attempt_at = a cooldown deadline in whole seconds — and the deploy task leases each
// through that stamp (leaseStamped) when it gets to it. Every later write of the sweep is a
// compare-and-set on (status, lease_owner, next_attempt_at): a publisher that stalled past its
// cooldown finds the row re-stamped by a newer claim and loses: its write matches nothing.
import {sql} from 'kysely'
import type {StoreContext} from '../context.js'
import {liveLease} from '../outbox-states.js'
import {settleUnfinishedVersion} from './deployments.js'
import {leaseAssignments, refusalOf, type LeaseByIdResult} from './outbox.js'
import {supersedeStamped, type SupersededRow} from './supersede.js'
import {parseJsonObject, type OutboxOperation, type OutboxRow, type OutboxStatus, type OutboxTable} from '../schema.js'

/** The (status, lease_owner, next_attempt_at) a sweep last wrote on a row; its next write must still match. */
export interface SweepStamp {
  id: string
  status: OutboxStatus
  lease_owner: string
  next_attempt_at: number
}

export interface RecoverableClaimOptions {
  scope: string
  owner: string
  limit: number
  /** A never-attempted row its enqueuer reserved stays theirs this long after enqueue. */
  graceSeconds: number
  cooldownSeconds: number
  /** Rows carrying this last_error_code are deferred (fence): only the deferred sweep takes them. */
  deferredMarker: string
}

export interface DeferredClaimOptions {
  scope: string
  owner: string
  cooldownSeconds: number
  deferredMarker: string
}

export class SweepRepository {
  constructor(private readonly ctx: StoreContext) {}

  /**
   * Stamps up to `limit` deploy rows of the scope that need a dispatcher, oldest due first:
   * - pending and due, not deferred, and nobody holds them: no owner (handed to the passes, e.g.
   *   `deploy --no-wait` or a released claim), or the owner's hold has lapsed — one cooldown since
   *   it last touched the row (a sweep that published it is leasing it right now; a runner that
   *   retried it waits at least that long), and for a row never attempted, the grace since enqueue
   *   (a waiting `deploy` reserved it; past the grace it has stalled and a sweep takes it over);
   * - leased with an expired lease, once the cooldown of any earlier stamp is over.
   */
  async claimRecoverableDeployments(options: RecoverableClaimOptions): Promise<OutboxRow[]> {
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const {scope, limit} = options
      const skipLocked = this.skipLocked()
      const {rows} = await sql<OutboxTable>`
        update edge_worker_outbox
        set lease_owner = ${options.owner}, next_attempt_at = ${cooldownStamp(now, options.cooldownSeconds)}, updated_at = ${now}
        where id in (
          select id from (
            select id, due_at, created_at from (
              select id, next_attempt_at as due_at, created_at from edge_worker_outbox
              where operation = 'deploy' and dispatch_namespace = ${scope}
                and status = 'pending' and next_attempt_at <= ${now}
                and (last_error_code is null or last_error_code <> ${options.deferredMarker})
                and (lease_owner is null or (
                  updated_at <= ${now - options.cooldownSeconds * 1000}
                  and (attempts > 0 or created_at <= ${now - options.graceSeconds * 1000})))
              order by next_attempt_at, created_at, id
              limit ${limit}
              ${skipLocked}
            ) as stalled_pending
            union all
            select id, due_at, created_at from (
              select id, lease_expires_at as due_at, created_at from edge_worker_outbox
              where status = 'leased' and lease_expires_at <= ${now}
                and operation = 'deploy' and dispatch_namespace = ${scope}
                and (next_attempt_at is null or next_attempt_at <= ${now})
              order by lease_expires_at, created_at, id
              limit ${limit}
              ${skipLocked}
            ) as expired_leases
          ) as recoverable
          order by due_at, created_at, id
          limit ${limit}
        )
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
        set lease_owner = ${options.owner}, next_attempt_at = ${cooldownStamp(now, options.cooldownSeconds)}, updated_at = ${now}
        where id in (
          select id from edge_worker_outbox
          where last_error_code = ${options.deferredMarker} and status = 'pending' and next_attempt_at <= ${now}
            and operation = 'deploy' and dispatch_namespace = ${options.scope}
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
   * for a row a sweep claimed). A pending row becomes due now, as when its enqueuer dispatches it;
   * `clearMarker` drops the deferred marker — the dispatch is accepted. An expired lease whose holder
   * renewed it since the claim stays the holder's. A refusal is explained by a read of the row.
   */
  async leaseStamped(stamp: SweepStamp, options: {scope: string; leaseSeconds: number; clearMarker: boolean}): Promise<LeaseByIdResult> {
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const nextAttemptAt = stamp.status === 'pending' ? now : stamp.next_attempt_at
      const clearMarker = options.clearMarker ? sql`, last_error_code = null, last_error = null` : sql``
      const {rows} = await sql<OutboxTable>`
        update edge_worker_outbox
        set ${leaseAssignments({owner: stamp.lease_owner, leaseSeconds: options.leaseSeconds}, now)}, next_attempt_at = ${nextAttemptAt} ${clearMarker}
        where id = ${stamp.id} and status = ${stamp.status} and lease_owner = ${stamp.lease_owner} and next_attempt_at = ${stamp.next_attempt_at}
          and dispatch_namespace = ${options.scope} and not ${liveLease(now)}
        returning *`.execute(db)
      if (rows[0]) return {disposition: 'acquired', row: toOutboxRow(rows[0])}
      const row = await db.selectFrom('edge_worker_outbox').selectAll().where('id', '=', stamp.id).executeTakeFirst()
      if (!row) return {disposition: 'missing', row: null}
      const refusal = refusalOf(row, options.scope, now)
      return {disposition: refusal === 'not_due' ? 'restamped' : refusal, row: toOutboxRow(row)}
    })
  }

  /**
   * Hands a pending row this sweep stamped but did not get to run back to the passes: no owner, due
   * now, its error marker as it was claimed. An expired lease needs nothing: it is claimable again
   * when the stamp's cooldown ends. false = a newer claim holds the row.
   */
  async release(stamp: SweepStamp, asClaimed: Pick<OutboxRow, 'last_error_code' | 'last_error'>): Promise<boolean> {
    if (stamp.status !== 'pending') return false
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const result = await this.matching(db, stamp)
        .set({lease_owner: null, next_attempt_at: now, last_error_code: asClaimed.last_error_code, last_error: asClaimed.last_error, updated_at: now})
        .executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }

  /**
   * Settles a stamped row `failed` or `uncertain` without touching anything else (e.g.
   * `worker_deleted`: the Worker and its versions are gone). false = a newer claim won.
   */
  async settleStamped(stamp: SweepStamp, outcome: {status: 'failed' | 'uncertain'; errorCode: string; error: string}): Promise<boolean> {
    return this.ctx.write(async (tx) => this.settleStampedIn(tx, stamp, outcome))
  }

  /**
   * Quarantines a stamped deploy whose row cannot be dispatched, in one transaction (lock order
   * outbox → worker → version): the row settles, an `uncertain` one pauses its Worker, and the
   * version takes the outcome unless it is already past deploying — a deployed version is never
   * downgraded. false = a newer claim won and nothing changed.
   */
  async quarantine(
    stamp: SweepStamp,
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
  async supersedeStamped(claimed: readonly {stamp: SweepStamp; versionId: string | null}[]): Promise<SupersededRow[]> {
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

  /** Rows of these operations in the scope that ended `failed` or `uncertain` and wait for an operator. */
  /**
   * Pending deploys of the scope the recovery sweep may not claim yet — a backoff not over, a
   * cooldown since a runner last touched the row, or a waiting `deploy` still within its grace —
   * with the moment the first of them becomes claimable (the rule of claimRecoverableDeployments).
   */
  async waitingDeployments(options: {
    scope: string
    cooldownSeconds: number
    graceSeconds: number
    deferredMarker: string
  }): Promise<{count: number; nextDueAt: number | null}> {
    const now = this.ctx.now()
    const cooldownMs = options.cooldownSeconds * 1000
    const graceMs = options.graceSeconds * 1000
    const rows = await this.ctx.db
      .selectFrom('edge_worker_outbox')
      .select(['next_attempt_at', 'updated_at', 'created_at', 'attempts', 'lease_owner'])
      .where('operation', '=', 'deploy')
      .where('dispatch_namespace', '=', options.scope)
      .where('status', '=', 'pending')
      .where((eb) => eb.or([eb('last_error_code', 'is', null), eb('last_error_code', '<>', options.deferredMarker)]))
      .where((eb) =>
        eb.or([
          eb('next_attempt_at', '>', now),
          eb.and([
            eb('lease_owner', 'is not', null),
            eb.or([eb('updated_at', '>', now - cooldownMs), eb.and([eb('attempts', '=', 0), eb('created_at', '>', now - graceMs)])]),
          ]),
        ]),
      )
      .execute()
    const dueAt = rows.map((row) => {
      const backoff = Number(row.next_attempt_at)
      if (row.lease_owner === null) return backoff
      return Math.max(backoff, Number(row.updated_at) + cooldownMs, row.attempts === 0 ? Number(row.created_at) + graceMs : 0)
    })
    return {count: rows.length, nextDueAt: dueAt.length > 0 ? Math.min(...dueAt) : null}
  }

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
    stamp: SweepStamp,
    outcome: {status: 'failed' | 'uncertain'; errorCode: string; error: string},
  ): Promise<boolean> {
    const result = await this.matching(tx.db, stamp)
      .set({
        status: outcome.status,
        lease_token: null,
        lease_expires_at: null,
        next_attempt_at: null,
        last_error_code: outcome.errorCode,
        last_error: outcome.error,
        updated_at: this.ctx.now(),
      })
      .executeTakeFirst()
    return result.numUpdatedRows > 0n
  }

  /** An update that applies only while the row still carries exactly the stamp this sweep wrote (the compare-and-set). */
  private matching(db: StoreContext['db'], stamp: SweepStamp) {
    return db
      .updateTable('edge_worker_outbox')
      .where('id', '=', stamp.id)
      .where('status', '=', stamp.status)
      .where('lease_owner', '=', stamp.lease_owner)
      .where('next_attempt_at', '=', stamp.next_attempt_at)
  }

  private skipLocked() {
    return this.ctx.locksRows ? sql`for update skip locked` : sql``
  }
}

/** The sweep's stamp for a row it claims: a cooldown deadline rounded to whole seconds (the CAS compares it exactly). */
export function cooldownStamp(now: number, cooldownSeconds: number): number {
  return (Math.floor(now / 1000) + cooldownSeconds) * 1000
}

/** The stamp a claimed row carries (the claim just wrote it). */
export function stampOf(row: OutboxRow): SweepStamp {
  if (row.lease_owner === null || row.next_attempt_at === null) throw new Error(`outbox row ${row.id} carries no sweep stamp`)
  return {id: row.id, status: row.status, lease_owner: row.lease_owner, next_attempt_at: row.next_attempt_at}
}

const oldestFirst = (a: OutboxRow, b: OutboxRow) => a.created_at - b.created_at || a.id.localeCompare(b.id)

function toOutboxRow(row: OutboxTable): OutboxRow {
  return {...row, payload: parseJsonObject(row.payload)}
}
