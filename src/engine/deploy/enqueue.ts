// The one way a deploy row enters the outbox. Dedupe key
// `deploy:{worker_id}:{version_id}:{base_revision}`, refused (`conflict`) when a digest differs from the version's;
// the maintenance gates refuse; a fence defers (the row is created `deferred`, its last_error_code
// `edge_host_fenced` saying why, and waits for the deferred-republish lane).
import {KitError} from '../../errors.js'
import {EDGE_HOST_FENCED} from '../../protocol/management-api.js'
import type {OutboxRow, VersionRow, WorkerRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {assertEnqueueGatesOpen} from '../gates.js'
import type {WorkerManifest} from '../project/manifest.js'
import {resolveServiceBindings} from './service-bindings.js'

export interface EnqueueDeployInput {
  worker: WorkerRow
  version: VersionRow
  scope: string
  baseRevision?: number
  operationSettingsDigest?: string
  /** The runner that runs the deploy task itself right after (a waiting `deploy`); unset hands the row to the passes. */
  dispatcher?: string
}

export interface EnqueueDeployResult {
  row: OutboxRow
  duplicate: boolean
  /** true: a fence is open; the row waits for `fence end` or a later pass. */
  deferred: boolean
}

export function deployDedupeKey(workerId: string, versionId: string, baseRevision: number, operationSettingsDigest?: string): string {
  const base = `deploy:${workerId}:${versionId}:${baseRevision}`
  return operationSettingsDigest ? `${base}:${operationSettingsDigest}` : base
}

export async function enqueueDeploy(engine: Engine, input: EnqueueDeployInput): Promise<EnqueueDeployResult> {
  const {store} = engine
  const digest = input.operationSettingsDigest
  if (digest !== undefined && !/^[0-9a-f]{64}$/.test(digest)) {
    throw new KitError('conflict', '409 operation-settings digest is invalid', 'operation_settings_digest_invalid')
  }
  await assertEnqueueGatesOpen(engine, input.scope)
  await resolveServiceBindings(engine, input.worker.company_id, input.version.manifest as unknown as WorkerManifest)
  const baseRevision = input.baseRevision ?? input.worker.base_revision
  const key = deployDedupeKey(input.worker.id, input.version.id, baseRevision, digest)
  const siblings = await store.deployments.deployKeysFor(deployDedupeKey(input.worker.id, input.version.id, baseRevision))
  if (siblings.some((sibling) => sibling !== key)) {
    throw new KitError('conflict', '409 operation-settings digest differs from the existing deployment', 'operation_settings_digest_differs')
  }
  const fenced = (await store.kit.openFence(input.scope)) !== undefined
  const {row, duplicate} = await store.outbox.enqueue({
    operation: 'deploy',
    dedupe_key: key,
    dispatch_namespace: input.scope,
    company_id: input.worker.company_id,
    department_id: input.worker.department_id,
    worker_id: input.worker.id,
    version_id: input.version.id,
    script_name: input.worker.script_name,
    payload: {
      releaseGeneration: input.version.release_generation,
      baseRevision,
      ...(digest ? {operationSettingsDigest: digest} : {}),
    },
    status: fenced ? 'deferred' : 'pending',
    last_error_code: fenced ? EDGE_HOST_FENCED : null,
    reserved_by: input.dispatcher ?? null,
  })
  return {row, duplicate, deferred: row.status === 'deferred'}
}
