// The deploy lane's multi-table transitions. Each method is one transaction that first proves the
// caller still holds the outbox lease (lease token), so a runner that lost its lease changes
// nothing. Lock order is always outbox → worker → version (one order, so no deadlock): every method
// locks the Worker row before it writes or locks a version, so two transactions never wait on each
// other the other way round (PostgreSQL 40P01).
//
// Which deploy wins: ./deploy-order.ts.
import type {StoreContext} from '../context.js'
import {deterministicId} from '../ids.js'
import {liveLease} from '../outbox-states.js'
import {parseJsonObject, type JsonObject, type OutboxRow, type VersionRow, type WorkerRow} from '../schema.js'
import {adoptIntents, makeIntentsDue, retryLeaseLater, settleLease} from '../outbox/statements.js'
import type {HeldLease, RetryLaterOptions} from '../outbox/types.js'
import {auditEntry, AuditRepository, SYSTEM_ACTOR} from './audit.js'
import {isNewer, newerDeployOf, supersededMessage, type NewerDeploy} from './deploy-order.js'
import {settleUnfinishedVersion, toVersionRow, WorkerRepository, type VersionCreateInput, type WorkerCreateInput} from './workers.js'

export const DEPLOY_SUPERSEDED = 'deploy_superseded'
export const DEPLOY_AUDIT_ACTIONS = {
  /** A deploy completed: which version serves from now on, and which one it replaced. */
  deployed: 'edge_worker.deployed',
  /** A deploy row yielded to a newer version without uploading (or after its release was replaced). */
  superseded: 'edge_worker.deploy_superseded',
} as const

export type BeginDeployingOutcome =
  | {outcome: 'deploying'}
  | {outcome: 'superseded'; newer: NewerDeploy}
  /** Another deploy row of this Worker is mid-deploy under a live lease: try again once it is done. */
  | {outcome: 'busy'; holder: string}
  | {outcome: 'lease_lost'}

export type CompleteOutcome = {outcome: 'completed'} | {outcome: 'superseded'; newer: NewerDeploy} | {outcome: 'lease_lost'}

export interface DeploymentSnapshot {
  outbox: OutboxRow
  /** undefined: the Worker row is gone (company hard delete). */
  worker: WorkerRow | undefined
  version: VersionRow | undefined
  /** The version the Worker serves now, if any (may be `version` itself). */
  current: VersionRow | undefined
  /** A newer version's deploy this row must yield to, if any. */
  newer: NewerDeploy | undefined
}

/** A Worker that serves nothing yet is `new`; one with a deployed version is `active`. */
const restingStatus = (worker: {current_version_id: string | null}) => (worker.current_version_id ? 'active' : 'new')

export class DeploymentRepository {
  constructor(private readonly ctx: StoreContext) {}

  /** Reads outbox → worker → version under row locks (PostgreSQL) or the write lock (SQLite); undefined if the lease is lost. */
  async snapshot(outboxId: string, leaseToken: string): Promise<DeploymentSnapshot | undefined> {
    return this.ctx.atomic(async (tx) => {
      const outbox = await this.lockOutbox(tx, outboxId, leaseToken)
      if (!outbox) return undefined
      const worker = outbox.worker_id ? await tx.lockRow('edge_workers', outbox.worker_id) : undefined
      const version = outbox.version_id ? await this.lockVersion(tx, outbox.version_id) : undefined
      const current =
        worker?.current_version_id && worker.current_version_id !== version?.id
          ? await this.lockVersion(tx, worker.current_version_id)
          : worker?.current_version_id
            ? version
            : undefined
      const newer = version ? await newerDeployOf(tx, version) : undefined
      return {outbox: {...outbox, payload: parseJsonObject(outbox.payload)}, worker, version, current, newer}
    })
  }

  /**
   * Marks the version `deploying` and pauses the Worker, in one transaction — the last check before
   * an upload, under the Worker's lock. Refused when a newer version's deploy exists (this row must
   * yield) or when another row of the Worker is mid-deploy under a live lease: two uploads of one
   * script at once could land in either order, so one waits (`busy`) and no update is lost.
   */
  async beginDeploying(ids: {outboxId: string; leaseToken: string; workerId: string; versionId: string}): Promise<BeginDeployingOutcome> {
    return this.ctx.atomic(async (tx) => {
      if (!(await this.lockOutbox(tx, ids.outboxId, ids.leaseToken))) return {outcome: 'lease_lost'}
      await tx.lockRow('edge_workers', ids.workerId)
      const version = await this.lockVersion(tx, ids.versionId)
      const newer = version ? await newerDeployOf(tx, version) : undefined
      if (newer) return {outcome: 'superseded', newer}
      const now = this.ctx.now()
      const holder = await tx.db
        .selectFrom('edge_worker_outbox as o')
        .innerJoin('edge_worker_versions as v', 'v.id', 'o.version_id')
        .select('o.id')
        .where('o.operation', '=', 'deploy')
        .where('o.worker_id', '=', ids.workerId)
        .where('o.id', '!=', ids.outboxId)
        .where(liveLease(now))
        .where('v.state', '=', 'deploying')
        .limit(1)
        .executeTakeFirst()
      if (holder) return {outcome: 'busy', holder: holder.id}
      await tx.db.updateTable('edge_workers').set({status: 'paused', updated_at: now}).where('id', '=', ids.workerId).execute()
      await tx.db
        .updateTable('edge_worker_versions')
        .set({state: 'deploying', updated_at: now})
        .where('id', '=', ids.versionId)
        .where('state', 'in', ['built', 'deploying', 'failed', 'uncertain', 'superseded'])
        .execute()
      return {outcome: 'deploying'}
    })
  }

  /**
   * Settles the deploy `completed`: the version becomes the Worker's deployed one, the previous
   * deployed version `superseded` (unless a split keeps it beside this one), the Worker `active` on this scope, and an `edge_worker.deployed`
   * audit row records version, release generation and the version it replaced. A Worker already
   * serving a newer version is never moved back: the row settles superseded instead.
   */
  async complete(ids: {
    outboxId: string
    leaseToken: string
    workerId: string
    versionId: string
    scope: string
    attempted: boolean
  }): Promise<CompleteOutcome> {
    const lease = {id: ids.outboxId, token: ids.leaseToken}
    return this.ctx.atomic(async (tx) => {
      if (!(await this.lockOutbox(tx, ids.outboxId, ids.leaseToken))) return {outcome: 'lease_lost'}
      const worker = await tx.lockRow('edge_workers', ids.workerId)
      const version = await this.lockVersion(tx, ids.versionId)
      const previous =
        worker?.current_version_id && worker.current_version_id !== ids.versionId ? await this.lockVersion(tx, worker.current_version_id) : undefined
      if (worker && version && previous && isNewer(previous, version)) {
        const newer = {versionId: previous.id, outboxId: null}
        await this.settleSuperseded(tx, {lease, worker, version, newer, attempted: ids.attempted})
        return {outcome: 'superseded', newer}
      }
      const now = this.ctx.now()
      await settleLease(tx, lease, {status: 'completed', errorCode: null, error: null, attempted: ids.attempted})
      // A gradual deployment's other version keeps serving beside this one: it stays `deployed`.
      const serving = [ids.versionId, ...(version?.split ? [version.split.beside.version_id] : [])]
      await tx.db
        .updateTable('edge_worker_versions')
        .set({state: 'superseded', updated_at: now})
        .where('worker_id', '=', ids.workerId)
        .where('state', '=', 'deployed')
        .where('id', 'not in', serving)
        .execute()
      await tx.db.updateTable('edge_worker_versions').set({state: 'deployed', deployed_at: now, updated_at: now}).where('id', '=', ids.versionId).execute()
      await tx.db
        .updateTable('edge_workers')
        .set({status: 'active', current_version_id: ids.versionId, serving_scope: ids.scope, updated_at: now})
        .where('id', '=', ids.workerId)
        .execute()
      if (worker && version) {
        const facts = {
          outbox_id: ids.outboxId,
          script_name: worker.script_name,
          scope: ids.scope,
          version_id: version.id,
          release_generation: version.release_generation,
          previous_version_id: previous?.id ?? null,
          previous_release_generation: previous?.release_generation ?? null,
          ...(version.split ? {percentage: version.split.percentage, beside: version.split.beside} : {}),
        }
        await new AuditRepository(tx).append(deployAuditEntry(DEPLOY_AUDIT_ACTIONS.deployed, worker.id, facts, 'success'))
      }
      return {outcome: 'completed'}
    })
  }

  /**
   * Settles a deploy row that yields to a newer version (`cancelled`, `deploy_superseded`, with an
   * audit row): its version, unless deployed, becomes `superseded`, and the Worker returns to its
   * resting status. false = lease lost.
   */
  async supersede(ids: {outboxId: string; leaseToken: string; workerId: string; versionId: string; newer: NewerDeploy; attempted: boolean}): Promise<boolean> {
    return this.ctx.atomic(async (tx) => {
      if (!(await this.lockOutbox(tx, ids.outboxId, ids.leaseToken))) return false
      const worker = await tx.lockRow('edge_workers', ids.workerId)
      const version = await this.lockVersion(tx, ids.versionId)
      const lease = {id: ids.outboxId, token: ids.leaseToken}
      if (worker && version) await this.settleSuperseded(tx, {lease, worker, version, newer: ids.newer, attempted: ids.attempted})
      return true
    })
  }

  /** The newer deploy this version yields to, read now (the readiness gate asks while it waits). */
  async newerDeploy(versionId: string): Promise<NewerDeploy | undefined> {
    return newerDeployOf(this.ctx, {id: versionId})
  }

  /**
   * Settles the deploy `failed` or `uncertain`. The version takes that state unless it is already
   * deployed (a failure never downgrades a deployed version). A failed deploy returns the Worker to
   * its resting status; an uncertain one leaves it paused until a later pass decides.
   */
  async finish(ids: {
    outboxId: string
    leaseToken: string
    workerId: string | null
    versionId: string | null
    status: 'failed' | 'uncertain'
    errorCode: string
    error: string
    attempted: boolean
  }): Promise<boolean> {
    return this.ctx.atomic(async (tx) => {
      if (!(await this.lockOutbox(tx, ids.outboxId, ids.leaseToken))) return false
      if (ids.workerId) await tx.lockRow('edge_workers', ids.workerId)
      const now = this.ctx.now()
      await settleLease(
        tx,
        {id: ids.outboxId, token: ids.leaseToken},
        {status: ids.status, errorCode: ids.errorCode, error: ids.error, attempted: ids.attempted},
      )
      if (ids.versionId) await settleUnfinishedVersion(tx, ids.versionId, ids.status, now)
      if (ids.workerId && ids.status === 'failed') await this.restWorker(tx, ids.workerId)
      return true
    })
  }

  /**
   * Hands the row back for later (the engine's retry rule: when, its waits, whether this run's
   * attempt counts; `failed` once attempts run out). When nothing reached the host the version
   * returns to `built` and the Worker to its resting status, so the next attempt uploads afresh.
   */
  async retryLater(
    ids: {
      outboxId: string
      leaseToken: string
      workerId: string | null
      versionId: string | null
      /** Set when the request may have been applied: the version stays `deploying` (reconcile mode next). */
      keepDeploying: boolean
    } & RetryLaterOptions,
  ): Promise<'rescheduled' | 'failed' | 'lease_lost'> {
    return this.ctx.atomic(async (tx) => {
      if (!(await this.lockOutbox(tx, ids.outboxId, ids.leaseToken))) return 'lease_lost'
      if (ids.workerId) await tx.lockRow('edge_workers', ids.workerId)
      const {outboxId, leaseToken, workerId: _worker, versionId: _version, keepDeploying: _keep, ...retry} = ids
      const outcome = await retryLeaseLater(tx, {id: outboxId, token: leaseToken}, retry)
      if (outcome.outcome === 'lease_lost') return 'lease_lost'
      const now = this.ctx.now()
      const exhausted = outcome.outcome === 'failed'
      if (ids.versionId && (exhausted || !ids.keepDeploying)) {
        await tx.db
          .updateTable('edge_worker_versions')
          .set({state: exhausted ? 'failed' : 'built', updated_at: now})
          .where('id', '=', ids.versionId)
          .where('state', '=', 'deploying')
          .execute()
      }
      if (ids.workerId && (exhausted || !ids.keepDeploying)) await this.restWorker(tx, ids.workerId)
      return outcome.outcome
    })
  }

  /**
   * Records a submission: creates the Worker on first deploy, inserts the version and adopts
   * (cancels) its artifact-cleanup intents in one transaction — the artifacts are now referenced.
   */
  async commitVersion(input: {
    worker: WorkerCreateInput & {id: string}
    createWorker: boolean
    version: VersionCreateInput & {id: string}
    intentDedupeKeys: string[]
  }): Promise<VersionRow> {
    return this.ctx.atomic(async (tx) => {
      // Outbox rows first (lock order outbox → worker → version).
      await adoptIntents(tx, input.intentDedupeKeys, input.version.id)
      const workers = new WorkerRepository(tx)
      if (input.createWorker) await workers.create(input.worker)
      return workers.createVersion(input.version)
    })
  }

  /** A submission that did not commit: its intents become due now, so cleanup removes the orphaned artifacts. */
  async makeIntentsDue(intentDedupeKeys: string[], errorCode = 'submission_not_committed'): Promise<number> {
    if (intentDedupeKeys.length === 0) return 0
    return this.ctx.write((tx) => makeIntentsDue(tx, intentDedupeKeys, errorCode))
  }

  /** The Worker's newest version (the last one created), if any. */
  async newestVersion(workerId: string): Promise<VersionRow | undefined> {
    const row = await this.ctx.db
      .selectFrom('edge_worker_versions')
      .selectAll()
      .where('worker_id', '=', workerId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst()
    return row && toVersionRow(row)
  }

  /** Dedupe keys of the deploy rows for one (worker, version, base revision), whatever their settings digest. */
  async deployKeysFor(keyPrefix: string): Promise<string[]> {
    const rows = await this.ctx.db
      .selectFrom('edge_worker_outbox')
      .select('dedupe_key')
      .where('operation', '=', 'deploy')
      .where((eb) => eb.or([eb('dedupe_key', '=', keyPrefix), eb('dedupe_key', 'like', `${keyPrefix}:%`)]))
      .execute()
    return rows.map((row) => row.dedupe_key)
  }

  /**
   * Settles one yielding row inside `tx` under its lease (the caller holds its outbox and version locks, and the
   * Worker's unless `restWorker` is false); also used a batch at a time (./supersede.ts). With
   * `restWorker` false the Worker is left as it is: nothing of this deploy touched it.
   */
  async settleSuperseded(
    tx: StoreContext,
    rows: {
      lease: HeldLease
      worker: Pick<WorkerRow, 'id' | 'script_name'>
      version: Pick<VersionRow, 'id' | 'release_generation'>
      newer: NewerDeploy
      restWorker?: boolean
      /** The row's runner asked the host in this run: one attempt more. */
      attempted?: boolean
    },
  ): Promise<void> {
    const {lease, worker, version, newer, restWorker = true, attempted = false} = rows
    await settleLease(tx, lease, {status: 'cancelled', errorCode: DEPLOY_SUPERSEDED, error: supersededMessage(newer.versionId), attempted})
    await tx.db
      .updateTable('edge_worker_versions')
      .set({state: 'superseded', updated_at: this.ctx.now()})
      .where('id', '=', version.id)
      .where('state', 'in', ['built', 'deploying', 'failed', 'uncertain'])
      .execute()
    if (restWorker) {
      // A Worker paused by another deploy under way stays paused: that deploy settles it.
      const underway = await tx.db
        .selectFrom('edge_worker_versions')
        .select('id')
        .where('worker_id', '=', worker.id)
        .where('state', '=', 'deploying')
        .limit(1)
        .executeTakeFirst()
      if (!underway) await this.restWorker(tx, worker.id)
    }
    const facts = {
      outbox_id: lease.id,
      script_name: worker.script_name,
      version_id: version.id,
      release_generation: version.release_generation,
      newer_version_id: newer.versionId,
    }
    await new AuditRepository(tx).append(deployAuditEntry(DEPLOY_AUDIT_ACTIONS.superseded, worker.id, facts, 'cancelled', DEPLOY_SUPERSEDED))
  }

  private async restWorker(tx: StoreContext, workerId: string): Promise<void> {
    const worker = await tx.db.selectFrom('edge_workers').select(['current_version_id', 'status']).where('id', '=', workerId).executeTakeFirst()
    if (!worker || worker.status === 'retired') return
    await tx.db
      .updateTable('edge_workers')
      .set({status: restingStatus(worker), updated_at: this.ctx.now()})
      .where('id', '=', workerId)
      .execute()
  }

  private async lockOutbox(tx: StoreContext, id: string, leaseToken: string) {
    return tx.db
      .selectFrom('edge_worker_outbox')
      .selectAll()
      .where('id', '=', id)
      .where('lease_token', '=', leaseToken)
      .where('status', '=', 'leased')
      .$if(this.ctx.locksRows, (q) => q.forUpdate())
      .executeTakeFirst()
  }

  private async lockVersion(tx: StoreContext, id: string): Promise<VersionRow | undefined> {
    const row = await tx.lockRow('edge_worker_versions', id)
    return row && toVersionRow(row)
  }
}

function deployAuditEntry(action: string, workerId: string, facts: JsonObject, result: string, reasonCode: string | null = null) {
  const id = deterministicId(action, String(facts.outbox_id))
  return auditEntry({id, action, resource: {type: 'edge_worker', id: workerId}, actor: SYSTEM_ACTOR, result, reasonCode, digest: true, facts})
}
