// `edgeworkers rollback` (and `versions deploy <version>@100`, ../versions/deploy-versions.ts): makes a
// stored version the Worker's deployed one again without a rebuild. The rollback is a NEW version —
// the newest, so it wins over anything older (docs/scheduling.md) — that copies the target's artifact
// keys, manifest and receipt (same release generation), committed with its audit row
// (`edge_worker.rolled_back`, or `edge_worker.deployment_changed`) in one transaction, then deployed by
// the same task as `deploy`: every crash-safety rule holds unchanged. Every refusal comes before anything is written.
import {KitError} from '../../errors.js'
import {auditEntry, deterministicId, newId, type AuditActor, type VersionRow, type VersionSplit, type WorkerRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {faultPoint} from '../faults.js'
import {assertEnqueueGatesOpen} from '../gates.js'
import {verifyStoredVersion} from '../project/integrity.js'
import {assertHostKnowsPairing, requireProvider} from '../provider.js'
import {enqueueAndRun, type DeployRun, type DeployStageOptions} from './deploy-worker.js'
import {storedVersionOf} from './task.js'
import {namedVersion} from '../versions/names.js'
import {isServedNow, servedVersions, type DeploymentPlan} from '../versions/deployment-spec.js'

export const ROLLED_BACK_ACTION = 'edge_worker.rolled_back'

export interface RollbackRequest {
  departmentId: string
  /** A version id (or a unique prefix of one) or a tag; default the version deployed before the current one. */
  to?: string
  message?: string
  wait: boolean
  actor: AuditActor
}

export interface RollbackOutcome extends DeployRun {
  /** The version whose artifacts the rollback deploys. */
  rolledBackTo: string
  /** A crashed rollback's copy was found and deployed instead of a new one. */
  reused: boolean
}

export async function rollbackWorker(engine: Engine, request: RollbackRequest, options: DeployStageOptions = {}): Promise<RollbackOutcome> {
  const choose = (versions: VersionRow[], current: VersionRow | undefined): DeploymentPlan => ({
    target: request.to === undefined ? previousDeployed(versions, current) : namedVersion(versions, request.to),
    split: null,
  })
  return redeployStoredVersion(
    engine,
    {...request, choose, action: ROLLED_BACK_ACTION, verb: 'rolled back to', defaultMessage: (target) => `rollback to ${target.id}`},
    options,
  )
}

export interface RedeployRequest {
  departmentId: string
  /** Picks the stored version to serve, and any split (refusing with one line); called before anything is written. */
  choose(versions: VersionRow[], current: VersionRow | undefined): DeploymentPlan
  /** The audit action committed with the copy. */
  action: string
  message?: string
  defaultMessage(target: VersionRow): string
  /** How a refusal names the operation: `version X cannot be <verb>: …`. */
  verb: string
  wait: boolean
  actor: AuditActor
}

/**
 * Serves a stored version again (`rollback`, `versions deploy <version>@100`): a copy committed as the
 * newest version with its audit row, then deployed by the deploy task.
 */
export async function redeployStoredVersion(engine: Engine, request: RedeployRequest, options: DeployStageOptions = {}): Promise<RollbackOutcome> {
  const {store} = engine
  const resolution = await requireProvider(engine, 'deploy')
  await assertEnqueueGatesOpen(engine, resolution.scope)
  if (request.wait) await assertHostKnowsPairing(engine, resolution.provider, resolution.scope, 'deploy')
  const worker = await store.workers.getByDepartment(request.departmentId)
  if (!worker) throw new KitError('not_found', `department ${request.departmentId} has no Worker`)
  if (worker.status === 'retired') {
    throw new KitError('conflict', `the Worker of department ${worker.department_id} is retired; retirement is permanent`, 'edge_host_script_retired')
  }
  const versions = await store.workers.listVersions(worker.id)
  const current = versions.find((version) => version.id === worker.current_version_id)
  const {target, split} = request.choose(versions, current)
  if (isServedNow(current, target, split)) {
    throw new KitError('usage', `version ${target.id} is already current (release ${target.release_generation}${split ? ` at ${split.percentage} %` : ''})`)
  }
  const verified = await verifyStoredVersion(engine.artifacts, storedVersionOf(target), engine.settings.deploy)
  if (!verified.ok) throw new KitError('conflict', `version ${target.id} cannot be ${request.verb}: ${verified.reason}`, verified.code)

  // A redeploy killed before its deploy was queued left its copy as the newest version: deploy that one.
  const newest = versions.at(-1)
  const leftOver =
    newest?.rollback_of !== null &&
    newest?.release_generation === target.release_generation &&
    ['built', 'deploying'].includes(newest.state) &&
    JSON.stringify(newest.split) === JSON.stringify(split)
  const copy = leftOver ? newest : await commitCopy(engine, worker, target, split, request)
  faultPoint('rollback.after_commit')
  const run = await enqueueAndRun(engine, {worker, version: copy, scope: resolution.scope, wait: request.wait}, options)
  return {...run, rolledBackTo: target.id, reused: leftOver}
}

/**
 * The most recent version other than the current one that served, with another release; while a
 * split is live, the version it keeps beside the current one (the old one, at 100 again).
 */
function previousDeployed(versions: VersionRow[], current: VersionRow | undefined): VersionRow {
  const beside = servedVersions(versions, current)[1]
  if (beside) return beside
  const served = versions
    .filter((version) => version.deployed_at !== null && version.id !== current?.id && version.release_generation !== current?.release_generation)
    .sort((a, b) => b.deployed_at! - a.deployed_at!)
  if (!served[0]) throw new KitError('not_found', 'no earlier deployed version to roll back to')
  return served[0]
}

async function commitCopy(engine: Engine, worker: WorkerRow, target: VersionRow, split: VersionSplit | null, request: RedeployRequest): Promise<VersionRow> {
  const id = newId()
  return engine.store.transaction(async (tx) => {
    const copy = await tx.workers.createVersion({
      id,
      worker_id: worker.id,
      release_generation: target.release_generation,
      builder_policy: target.builder_policy,
      project_artifact_key: target.project_artifact_key,
      project_digest: target.project_digest,
      bundle_artifact_key: target.bundle_artifact_key,
      bundle_digest: target.bundle_digest,
      manifest: target.manifest,
      receipt: target.receipt,
      message: request.message ?? request.defaultMessage(target),
      author: request.actor.id,
      source: target.source,
      size_bytes: target.size_bytes,
      rollback_of: target.id,
      split,
      asset_digests: {sameAs: target.id},
    })
    const facts = {
      script_name: worker.script_name,
      version_id: id,
      rollback_of: target.id,
      release_generation: target.release_generation,
      previous_version_id: worker.current_version_id,
      ...(split ? {percentage: split.percentage, beside: {...split.beside}} : {}),
    }
    await tx.audit.append(
      auditEntry({
        id: deterministicId(request.action, id),
        action: request.action,
        resource: {type: 'edge_worker', id: worker.id},
        actor: request.actor,
        digest: true,
        facts,
      }),
    )
    return copy
  })
}
