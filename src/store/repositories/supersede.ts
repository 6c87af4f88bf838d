// A backlog's superseded rows, settled a claim batch at a time. A sweep that claims several versions
// of the same Workers (e.g. 5,000 queued `deploy --no-wait`s) would otherwise run the deploy task for
// each older row only to have it yield: a lease, a snapshot and a settle, three commits per row.
// Here the rows of one claim that yield settle in one transaction, exactly as the task's supersede
// step settles one (DeploymentRepository.settleSuperseded: `cancelled`/`deploy_superseded`, the
// version superseded, the Worker rested, one audit row each), by the one ordering rule
// (newerDeploysOf). Only rows the claim's lease still holds are touched (nobody took them over
// since). A row a previous runner may have left mid-deploy yields the same way: the task, too,
// settles it superseded at its snapshot, before any reconcile step.
import type {StoreContext} from '../context.js'
import {newerDeploysOf, type NewerDeploy} from './deploy-order.js'
import {DeploymentRepository} from './deployments.js'
import type {HeldLease} from '../outbox/types.js'

export interface SupersededRow {
  outboxId: string
  newer: NewerDeploy
}

/**
 * Settles superseded the leased deploy rows whose version has a newer deploy, in one
 * transaction (lock order outbox → worker → version, each set in id order; a Worker only when a
 * yielding row's version is mid-deploy). Rows the deploy task
 * would fail rather than let yield (Worker or version gone, arguments that do not match it) are
 * left to the task. Returns the rows it settled.
 */
export async function supersedeLeased(ctx: StoreContext, claimed: readonly {lease: HeldLease; versionId: string | null}[]): Promise<SupersededRow[]> {
  const candidates = claimed.filter((row) => row.versionId)
  if (candidates.length === 0) return []
  // An unlocked look first: most claims outside a backlog have nothing that yields, and then take no locks.
  const unlockedLook = await newerDeploysOf(
    ctx,
    candidates.map((row) => row.versionId!),
  )
  if (unlockedLook.size === 0) return []
  const tokens = new Map(candidates.map((row) => [row.lease.id, row.lease.token]))
  return ctx.atomic(async (tx) => {
    const locked = await tx.db
      .selectFrom('edge_worker_outbox')
      .selectAll()
      .where('id', 'in', [...tokens.keys()])
      .orderBy('id')
      .$if(tx.locksRows, (q) => q.forUpdate())
      .execute()
    const held = locked.filter(
      (row) => row.operation === 'deploy' && row.worker_id && row.version_id && row.status === 'leased' && row.lease_token === tokens.get(row.id),
    )
    const newer = await newerDeploysOf(
      tx,
      held.map((row) => row.version_id!),
    )
    const yielding = held.filter((row) => newer.has(row.version_id!))
    if (yielding.length === 0) return []
    // A Worker is locked (and rested) only for a row whose version is mid-deploy: only that deploy
    // may have paused it. The other rows' yields leave the Worker alone, so passes yielding rows of
    // the same Workers at once do not queue for their locks. A version of a row that yields cannot
    // start deploying meanwhile: beginDeploying checks the newer deploy first.
    const versionIds = [...new Set(yielding.map((row) => row.version_id!))]
    const midDeploy = await tx.db
      .selectFrom('edge_worker_versions')
      .select('worker_id')
      .where('id', 'in', versionIds)
      .where('state', '=', 'deploying')
      .execute()
    const restedWorkers = new Set(midDeploy.map((version) => version.worker_id))
    const workers = await tx.db
      .selectFrom('edge_workers')
      .select(['id', 'company_id', 'department_id', 'script_name'])
      .where('id', 'in', [...new Set(yielding.map((row) => row.worker_id!))])
      .execute()
    if (tx.locksRows && restedWorkers.size > 0) {
      await tx.db
        .selectFrom('edge_workers')
        .select('id')
        .where('id', 'in', [...restedWorkers])
        .orderBy('id')
        .forUpdate()
        .execute()
    }
    const versions = await tx.db
      .selectFrom('edge_worker_versions')
      .select(['id', 'worker_id', 'release_generation'])
      .where('id', 'in', versionIds)
      .orderBy('id')
      .$if(tx.locksRows, (q) => q.forUpdate())
      .execute()
    const workerOf = new Map(workers.map((worker) => [worker.id, worker]))
    const versionOf = new Map(versions.map((version) => [version.id, version]))
    const deployments = new DeploymentRepository(tx)
    const settled: SupersededRow[] = []
    for (const row of yielding) {
      const worker = workerOf.get(row.worker_id!)
      const version = versionOf.get(row.version_id!)
      if (!worker || !version || version.worker_id !== worker.id || worker.company_id !== row.company_id || worker.department_id !== row.department_id) continue
      const yieldsTo = newer.get(version.id)!
      await deployments.settleSuperseded(tx, {
        lease: {id: row.id, token: tokens.get(row.id)!},
        worker,
        version,
        newer: yieldsTo,
        restWorker: restedWorkers.has(worker.id),
      })
      settled.push({outboxId: row.id, newer: yieldsTo})
    }
    return settled
  })
}
