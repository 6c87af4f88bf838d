// What the recovery and deferred lanes do with the deploy rows they stamped, several Workers at once:
// quarantine a row that cannot be dispatched, settle one whose Worker is gone, else publish it
// (compare-and-set) and run the deploy task in-process. Rows the lane does not get to go back to the passes.
import {z} from 'zod'
import {isTransientConflict, SCRIPT_NAME_PATTERN, stampOf, type OutboxRow, type SweepStamp} from '../../store/index.js'
import type {DeployTaskResult} from '../deploy/task.js'
import type {LaneRun, RowOutcome} from './lane.js'
import {messageOf} from '../../errors.js'

export const DEPLOYMENT_PAYLOAD_INVALID = 'deployment_payload_invalid'
export const WORKER_DELETED = 'worker_deleted'
export const WORKER_DELETED_MESSAGE = 'the Worker row no longer exists'

/** The deploy payload exactly as enqueueDeploy (../deploy/enqueue.ts) writes it. */
const deployPayload = z.strictObject({
  releaseGeneration: z.string().min(1),
  baseRevision: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  operationSettingsDigest: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
})

/** Why a deploy row cannot be handed to the deploy task, or null when it can. */
export function deployRowProblem(row: OutboxRow): string | null {
  for (const column of ['company_id', 'department_id', 'worker_id', 'version_id'] as const) {
    if (!row[column]?.trim()) return `the deploy row has no ${column}`
  }
  if (!row.script_name || !SCRIPT_NAME_PATTERN.test(row.script_name)) return `the deploy row's script name ${JSON.stringify(row.script_name)} is invalid`
  const payload = deployPayload.safeParse(row.payload)
  if (!payload.success) {
    const issue = payload.error.issues[0]!
    return `the deploy payload is invalid: ${issue.path.join('.') || '(payload)'}: ${issue.message}`
  }
  return null
}

/**
 * Works through a batch of claimed rows, up to `reconcile.deploy_concurrency` at once so that their
 * uploads reach the host together and share its shard restarts. Rows of one Worker never run at
 * once: they go one after another, oldest first (an older one finds the newer row and yields without
 * uploading). Each row is counted. Rows this pass already handled (they came due again) and rows
 * without an outcome — not started because the lane must stop or the gate closed, or ended by an
 * error — are handed back. Returns whether the lane may claim another batch.
 */
export async function dispatchClaimedDeploys(run: LaneRun, claimed: OutboxRow[], options: {clearMarker: boolean}): Promise<{claimMore: boolean}> {
  const {store} = run.engine
  run.counts.claimed += claimed.length
  const fresh = claimed.filter((row) => run.firstVisit(row.id))
  const handBack = claimed.filter((row) => !fresh.includes(row))
  const counted = new Set<string>()
  let gateClosed = false
  let failure: unknown
  const mayStart = () => !gateClosed && failure === undefined && !run.shouldStop()
  try {
    const live = await store.sweeps.existingWorkerIds(fresh.flatMap((row) => (row.worker_id ? [row.worker_id] : [])))
    const queues = [...rowsByWorker(fresh).values()]
    const runQueues = async () => {
      for (let queue = queues.shift(); queue; queue = queues.shift()) {
        for (const row of queue) {
          if (!mayStart()) return
          const dispatched = await dispatchOne(run, row, live, options).catch(async (error: unknown) => {
            // A store conflict that outlived the transaction's own retries costs this row, not the
            // batch: it goes back to the passes (or, once leased, to recovery when its lease expires).
            if (!isTransientConflict(error)) throw error
            run.engine.log.warn({outboxId: row.id, err: error}, `Edge Worker deployment handed back after a store conflict: ${messageOf(error)}`)
            await store.sweeps.release(stampOf(row), row).catch(() => false)
            return {outcome: 'skipped' as const, gateClosed: false}
          })
          run.counts[dispatched.outcome]++
          counted.add(row.id)
          run.rowDone({rowId: row.id, scriptName: row.script_name, outcome: dispatched.outcome})
          gateClosed ||= dispatched.gateClosed
        }
      }
    }
    const concurrency = Math.min(run.engine.settings.reconcile.deploy_concurrency, queues.length)
    // Every runner settles before the error is raised: none is left writing after the lane returns.
    await Promise.all(Array.from({length: concurrency}, () => runQueues().catch((error: unknown) => void (failure ??= error))))
    if (failure !== undefined) throw failure
  } finally {
    for (const row of [...fresh.filter((row) => !counted.has(row.id)), ...handBack]) {
      // Best effort: a row not handed back stays stamped and is claimable again once its hold ends.
      await store.sweeps.release(stampOf(row), row).catch(() => false)
      run.counts.skipped++
    }
  }
  return {claimMore: handBack.length === 0 && !gateClosed}
}

/** The rows grouped per Worker, each group oldest first (as claimed); a row without a Worker alone. */
function rowsByWorker(rows: OutboxRow[]): Map<string, OutboxRow[]> {
  const groups = new Map<string, OutboxRow[]>()
  for (const row of rows) {
    const key = row.worker_id?.trim() ? `worker:${row.worker_id}` : `row:${row.id}`
    groups.set(key, [...(groups.get(key) ?? []), row])
  }
  return groups
}

async function dispatchOne(
  run: LaneRun,
  row: OutboxRow,
  liveWorkers: Set<string>,
  options: {clearMarker: boolean},
): Promise<{outcome: RowOutcome; gateClosed: boolean}> {
  const {store, log} = run.engine
  const stamp = stampOf(row)
  const fields = {outboxId: row.id, workerId: row.worker_id, versionId: row.version_id}

  const problem = deployRowProblem(row)
  if (problem) return {outcome: await quarantine(run, row, stamp, problem), gateClosed: false}

  if (!liveWorkers.has(row.worker_id!)) {
    // The company was hard-deleted: nothing left to update or audit; the row is the only evidence.
    const settled = await store.sweeps.settleStamped(stamp, {status: 'failed', errorCode: WORKER_DELETED, error: WORKER_DELETED_MESSAGE})
    if (!settled) return {outcome: 'skipped', gateClosed: false}
    log.warn({...fields, code: WORKER_DELETED}, `Edge Worker deployment failed: ${WORKER_DELETED_MESSAGE}`)
    return {outcome: 'failed', gateClosed: false}
  }

  const published = await store.sweeps.publish(stamp, options)
  if (!published) {
    log.debug(fields, 'Edge Worker deployment republish lost: a newer claim holds the row')
    return {outcome: 'skipped', gateClosed: false}
  }
  const result = await run.dispatchDeploy(run.engine, {outboxId: row.id, companyId: row.company_id!, departmentId: row.department_id!, messageId: row.id})
  if (result.outcome === 'retry_later') {
    // The gate closed after the claim: the task did not touch the row. Give it back as it was claimed.
    await store.sweeps.release(published, row)
    log.info(fields, `Edge Worker deployment republish deferred: ${result.message}`)
  }
  return {outcome: outcomeOf(result), gateClosed: result.outcome === 'retry_later'}
}

/**
 * A row that was leased before, or whose version is mid-deploy, may have reached the host: it
 * becomes `uncertain` and its Worker pauses. Otherwise nothing happened yet and it is `failed`.
 */
async function quarantine(run: LaneRun, row: OutboxRow, stamp: SweepStamp, problem: string): Promise<RowOutcome> {
  const {store, log} = run.engine
  const version = row.version_id ? await store.workers.getVersion(row.version_id) : undefined
  const mayHaveReachedHost = row.status === 'leased' || row.attempts > 0 || version?.state === 'deploying'
  const status = mayHaveReachedHost ? 'uncertain' : 'failed'
  const settled = await store.sweeps.quarantine(stamp, {
    status,
    errorCode: DEPLOYMENT_PAYLOAD_INVALID,
    error: problem,
    workerId: row.worker_id?.trim() ? row.worker_id : null,
    versionId: version ? version.id : null,
  })
  if (!settled) return 'skipped'
  log.warn({outboxId: row.id, code: DEPLOYMENT_PAYLOAD_INVALID, status}, `Edge Worker deployment quarantined: ${problem}`)
  return status
}

function outcomeOf(result: DeployTaskResult): RowOutcome {
  switch (result.outcome) {
    // Settled on purpose, nothing left to do: a newer version of the Worker wins.
    case 'superseded':
      return 'completed'
    case 'completed':
    case 'failed':
    case 'uncertain':
      return result.outcome
    case 'retry':
      return result.exhausted ? 'failed' : 'retried'
    case 'retry_later':
    case 'skipped':
    case 'lease_lost':
      return 'skipped'
  }
}
