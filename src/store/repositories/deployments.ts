// The deploy lane's multi-table transitions. Each method is one transaction that first proves the
// caller still holds the outbox lease (lease token), so a runner that lost its lease changes
// nothing. Lock order is always outbox → worker → version, as the reference requires.
import type {StoreContext} from '../context.js'
import {
  parseJsonObject,
  type EdgeWorkerVersionsTable,
  type JsonObject,
  type OutboxRow,
  type VersionRow,
  type VersionState,
  type WorkerRow,
} from '../schema.js'
import {OutboxRepository} from './outbox.js'
import {WorkerRepository, type VersionCreateInput, type WorkerCreateInput} from './workers.js'

export interface DeploymentSnapshot {
  outbox: OutboxRow
  /** undefined: the Worker row is gone (company hard delete). */
  worker: WorkerRow | undefined
  version: VersionRow | undefined
  /** The version the Worker serves now, if any (may be `version` itself). */
  current: VersionRow | undefined
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
      const worker = outbox.worker_id ? await this.lockWorker(tx, outbox.worker_id) : undefined
      const version = outbox.version_id ? await this.lockVersion(tx, outbox.version_id) : undefined
      const current =
        worker?.current_version_id && worker.current_version_id !== version?.id
          ? await this.lockVersion(tx, worker.current_version_id)
          : worker?.current_version_id
            ? version
            : undefined
      return {outbox: {...outbox, payload: parseJsonObject(outbox.payload)}, worker, version, current}
    })
  }

  /** Marks the version `deploying` and pauses the Worker, in one transaction. false = lease lost. */
  async beginDeploying(ids: {outboxId: string; leaseToken: string; workerId: string; versionId: string}): Promise<boolean> {
    return this.ctx.atomic(async (tx) => {
      if (!(await this.lockOutbox(tx, ids.outboxId, ids.leaseToken))) return false
      const now = this.ctx.now()
      await tx.db.updateTable('edge_workers').set({status: 'paused', updated_at: now}).where('id', '=', ids.workerId).execute()
      await tx.db
        .updateTable('edge_worker_versions')
        .set({state: 'deploying', updated_at: now})
        .where('id', '=', ids.versionId)
        .where('state', 'in', ['built', 'deploying', 'failed', 'uncertain', 'superseded'])
        .execute()
      return true
    })
  }

  /**
   * Settles the deploy `completed`: the version becomes the Worker's deployed one, the previous
   * deployed version `superseded`, the Worker `active` on this scope. false = lease lost.
   */
  async complete(ids: {outboxId: string; leaseToken: string; workerId: string; versionId: string; scope: string}): Promise<boolean> {
    return this.ctx.atomic(async (tx) => {
      if (!(await this.lockOutbox(tx, ids.outboxId, ids.leaseToken))) return false
      const now = this.ctx.now()
      await this.settleOutbox(tx, ids.outboxId, 'completed', null, null)
      await tx.db
        .updateTable('edge_worker_versions')
        .set({state: 'superseded', updated_at: now})
        .where('worker_id', '=', ids.workerId)
        .where('state', '=', 'deployed')
        .where('id', '!=', ids.versionId)
        .execute()
      await tx.db.updateTable('edge_worker_versions').set({state: 'deployed', updated_at: now}).where('id', '=', ids.versionId).execute()
      await tx.db
        .updateTable('edge_workers')
        .set({status: 'active', current_version_id: ids.versionId, serving_scope: ids.scope, updated_at: now})
        .where('id', '=', ids.workerId)
        .execute()
      return true
    })
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
  }): Promise<boolean> {
    return this.ctx.atomic(async (tx) => {
      if (!(await this.lockOutbox(tx, ids.outboxId, ids.leaseToken))) return false
      const now = this.ctx.now()
      await this.settleOutbox(tx, ids.outboxId, ids.status, ids.errorCode, ids.error)
      if (ids.versionId) await settleUnfinishedVersion(tx, ids.versionId, ids.status, now)
      if (ids.workerId && ids.status === 'failed') await this.restWorker(tx, ids.workerId)
      return true
    })
  }

  /**
   * Hands the row back for a later attempt (backoff ladder; `failed` once attempts run out). When
   * nothing reached the host the version returns to `built` and the Worker to its resting status,
   * so the next attempt uploads afresh.
   */
  async retryLater(ids: {
    outboxId: string
    leaseToken: string
    workerId: string | null
    versionId: string | null
    errorCode: string
    error: string
    /** Set when the request may have been applied: the version stays `deploying` (reconcile mode next). */
    keepDeploying: boolean
  }): Promise<'rescheduled' | 'failed' | 'lease_lost'> {
    return this.ctx.atomic(async (tx) => {
      if (!(await this.lockOutbox(tx, ids.outboxId, ids.leaseToken))) return 'lease_lost'
      const outcome = await new OutboxRepository(tx).retryLater(ids.outboxId, ids.leaseToken, {errorCode: ids.errorCode, error: ids.error})
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
      const workers = new WorkerRepository(tx)
      if (input.createWorker) await workers.create(input.worker)
      const version = await workers.createVersion(input.version)
      const now = this.ctx.now()
      if (input.intentDedupeKeys.length > 0) {
        await tx.db
          .updateTable('edge_worker_outbox')
          .set({
            status: 'cancelled',
            next_attempt_at: null,
            last_error_code: 'adopted',
            last_error: `artifact adopted by version ${version.id}`,
            updated_at: now,
          })
          .where('operation', '=', 'artifact_cleanup')
          .where('status', '=', 'pending')
          .where('dedupe_key', 'in', input.intentDedupeKeys)
          .execute()
      }
      return version
    })
  }

  /** A submission that did not commit: its intents become due now, so cleanup removes the orphaned artifacts. */
  async makeIntentsDue(intentDedupeKeys: string[], errorCode = 'submission_not_committed'): Promise<number> {
    if (intentDedupeKeys.length === 0) return 0
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const result = await db
        .updateTable('edge_worker_outbox')
        .set({next_attempt_at: now, last_error_code: errorCode, updated_at: now})
        .where('operation', '=', 'artifact_cleanup')
        .where('status', '=', 'pending')
        .where('dedupe_key', 'in', intentDedupeKeys)
        .executeTakeFirst()
      return Number(result.numUpdatedRows)
    })
  }

  /** A built version of this Worker with the same release generation, to reuse instead of rebuilding. */
  async findVersionByGeneration(workerId: string, releaseGeneration: string): Promise<VersionRow | undefined> {
    const row = await this.ctx.db
      .selectFrom('edge_worker_versions')
      .selectAll()
      .where('worker_id', '=', workerId)
      .where('release_generation', '=', releaseGeneration)
      .orderBy('created_at', 'desc')
      .limit(1)
      .executeTakeFirst()
    return row && toVersionRow(row)
  }

  async workerOfDepartment(departmentId: string): Promise<WorkerRow | undefined> {
    return this.ctx.db.selectFrom('edge_workers').selectAll().where('department_id', '=', departmentId).executeTakeFirst()
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

  private async restWorker(tx: StoreContext, workerId: string): Promise<void> {
    const worker = await tx.db.selectFrom('edge_workers').select(['current_version_id', 'status']).where('id', '=', workerId).executeTakeFirst()
    if (!worker || worker.status === 'retired') return
    await tx.db.updateTable('edge_workers').set({status: restingStatus(worker), updated_at: this.ctx.now()}).where('id', '=', workerId).execute()
  }

  private async settleOutbox(tx: StoreContext, id: string, status: string, errorCode: string | null, error: string | null): Promise<void> {
    await tx.db
      .updateTable('edge_worker_outbox')
      .set({
        status: status as OutboxRow['status'],
        lease_token: null,
        lease_expires_at: null,
        next_attempt_at: null,
        last_error_code: errorCode,
        last_error: error,
        updated_at: this.ctx.now(),
      })
      .where('id', '=', id)
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

  private async lockWorker(tx: StoreContext, id: string): Promise<WorkerRow | undefined> {
    return tx.db.selectFrom('edge_workers').selectAll().where('id', '=', id).$if(this.ctx.locksRows, (q) => q.forUpdate()).executeTakeFirst()
  }

  private async lockVersion(tx: StoreContext, id: string): Promise<VersionRow | undefined> {
    const row = await tx.db
      .selectFrom('edge_worker_versions')
      .selectAll()
      .where('id', '=', id)
      .$if(this.ctx.locksRows, (q) => q.forUpdate())
      .executeTakeFirst()
    return row && toVersionRow(row)
  }
}

/**
 * Gives a version the outcome of a deploy that did not complete. Only a version still on its way
 * (`built`, `deploying`) takes it: a failure never downgrades a deployed or superseded version.
 */
export async function settleUnfinishedVersion(tx: StoreContext, versionId: string, state: 'failed' | 'uncertain', now: number): Promise<void> {
  await tx.db
    .updateTable('edge_worker_versions')
    .set({state, updated_at: now})
    .where('id', '=', versionId)
    .where('state', 'in', ['built', 'deploying'])
    .execute()
}

function toVersionRow(row: EdgeWorkerVersionsTable): VersionRow {
  return {...row, state: row.state as VersionState, manifest: parseJsonObject(row.manifest) as JsonObject, receipt: parseJsonObject(row.receipt)}
}
