// `edgeworkers deploy` as one engine call: build and commit the version, enqueue its deploy, and
// (unless asked not to wait) run the deploy task in-process. Gates and pairing are checked before
// anything is written, so a refused deploy leaves no artifact, version or outbox row.
import {EDGE_HOST_FENCED} from '../../protocol/management-api.js'
import {DEPLOY_SUPERSEDED, type OutboxRow, type VersionRow, type WorkerRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {assertEnqueueGatesOpen} from '../gates.js'
import {LEASE_LOST} from '../row-result.js'
import {enqueueDeploy} from './enqueue.js'
import {deployRowResult, GATE_CLOSED} from './row-result.js'
import {submitVersion, type VersionNotes} from './submit.js'
import {runDeployTask, type DeployStage} from './task.js'
import {assertHostKnowsPairing, requireProvider} from '../provider.js'
import type {ProjectSource, ProjectSourceOptions} from '../project/source.js'
import {workerUrl} from '../workers.js'

/** `superseded`: a newer version of the Worker was queued or deployed meanwhile; this one settled without serving. */
export type DeployState = 'completed' | 'superseded' | 'deferred' | 'pending' | 'failed' | 'uncertain'

/** How a deploy row of one version ran: what `deploy` and `rollback` both report. */
export interface DeployRun {
  state: DeployState
  code: string | null
  message: string | null
  scriptName: string
  workerId: string
  versionId: string
  releaseGeneration: string
  outboxId: string
  /** The enqueue found an existing row for this (worker, version, base revision). */
  duplicate: boolean
  /** Where the Worker answers, once deployed. */
  url: string | null
}

export interface DeployOutcome extends DeployRun {
  /** The project built to a release this Worker already had; that version was reused. */
  reused: boolean
  /** What the project was read from (edgeworker.json or a wrangler config, which env, bundled or not). */
  source: {file: string; kind: ProjectSource['kind']; env: string | null; bundled: boolean}
  /** Notes of the build for the operator: wrangler keys ignored on-prem, which manifest won. */
  warnings: string[]
}

export interface DeployStageOptions {
  onStage?: (stage: DeployStage | 'build' | 'enqueue') => void
  onEnqueued?: (outboxId: string) => void
}

export interface DeployRequest {
  projectDir: string
  /** Default: the department a wrangler config's [edgeworkers] table names. */
  departmentId?: string
  wait: boolean
  operationSettingsDigest?: string
  /** wrangler projects: the env section, no_bundle, the builder policy. */
  source?: ProjectSourceOptions
  /** With --env: deploy the env onto the production department's Worker all the same. */
  ontoProduction?: boolean
  /** --message, --tag and the operator, recorded on the version. */
  notes?: VersionNotes
  /** --percentage: the new version serves this share beside the version served now. */
  percentage?: number
}

export async function deployWorker(engine: Engine, request: DeployRequest, options: DeployStageOptions = {}): Promise<DeployOutcome> {
  const resolution = await requireProvider(engine, 'deploy')
  await assertEnqueueGatesOpen(engine, resolution.scope)
  if (request.wait) await assertHostKnowsPairing(engine, resolution.provider, resolution.scope, 'deploy')

  options.onStage?.('build')
  const {worker, version, reused, source} = await submitVersion(engine, {
    projectDir: request.projectDir,
    departmentId: request.departmentId,
    scope: resolution.scope,
    source: request.source,
    ontoProduction: request.ontoProduction,
    notes: request.notes,
    percentage: request.percentage,
  })
  const run = await enqueueAndRun(
    engine,
    {worker, version, scope: resolution.scope, wait: request.wait, operationSettingsDigest: request.operationSettingsDigest},
    options,
  )
  return {
    ...run,
    reused,
    source: {file: source.file, kind: source.kind, env: source.env, bundled: source.bundled},
    warnings: source.warnings,
  }
}

/** Enqueues the deploy of a committed version and (waiting) runs its task in this process. */
export async function enqueueAndRun(
  engine: Engine,
  target: {worker: WorkerRow; version: VersionRow; scope: string; wait: boolean; operationSettingsDigest?: string},
  options: DeployStageOptions = {},
): Promise<DeployRun> {
  const stage = options.onStage ?? (() => {})
  const {worker, version} = target
  stage('enqueue')
  const enqueued = await enqueueDeploy(engine, {
    worker,
    version,
    scope: target.scope,
    operationSettingsDigest: target.operationSettingsDigest,
    // Waiting, this process runs the task next and reserves the row; --no-wait hands it to the next pass.
    dispatcher: target.wait ? engine.owner : undefined,
  })
  options.onEnqueued?.(enqueued.row.id)
  const base = {
    scriptName: worker.script_name,
    workerId: worker.id,
    versionId: version.id,
    releaseGeneration: version.release_generation,
    outboxId: enqueued.row.id,
    duplicate: enqueued.duplicate,
  }
  const outcome = async (state: DeployState, code: string | null, message: string | null): Promise<DeployRun> => ({
    ...base,
    state,
    code,
    message,
    url: state === 'completed' ? await workerUrl(engine, worker.script_name) : null,
  })

  if (enqueued.deferred) return outcome('deferred', EDGE_HOST_FENCED, 'a backup fence is open; the deploy runs when it ends')
  if (isFinished(enqueued.row)) return outcome(stateOfFinished(enqueued.row), enqueued.row.last_error_code, enqueued.row.last_error)
  if (!target.wait) return outcome('pending', null, 'left to the next reconcile pass')
  const result = await runDeployTask(
    engine,
    {outboxId: enqueued.row.id, companyId: worker.company_id, departmentId: worker.department_id, messageId: enqueued.row.id},
    {onStage: stage},
  )
  const row = deployRowResult(result)
  switch (row.outcome) {
    case 'done':
      return outcome(row.code === DEPLOY_SUPERSEDED ? 'superseded' : 'completed', row.code, row.message)
    case 'terminal':
      return outcome('failed', row.code, row.message)
    case 'uncertain':
      return outcome('uncertain', row.code, row.message)
    case 'requeue_after':
      return outcome('pending', row.code, `${row.message}; a later pass retries`)
    case 'skipped': {
      if (row.reason === GATE_CLOSED) return outcome('deferred', null, row.message ?? null)
      if (row.reason === LEASE_LOST.reason) return outcome('pending', null, 'another runner took over this deploy')
      const current = await engine.store.outbox.get(enqueued.row.id)
      if (current && isFinished(current)) return outcome(stateOfFinished(current), current.last_error_code, current.last_error)
      return outcome('pending', null, `the deploy row is ${row.reason}; a later pass finishes it`)
    }
  }
}

function isFinished(row: OutboxRow): boolean {
  return row.status === 'completed' || row.status === 'failed' || row.status === 'uncertain' || row.status === 'cancelled'
}

function stateOfFinished(row: OutboxRow): DeployState {
  if (row.status === 'cancelled' && row.last_error_code === DEPLOY_SUPERSEDED) return 'superseded'
  return row.status === 'completed' ? 'completed' : row.status === 'uncertain' ? 'uncertain' : 'failed'
}
