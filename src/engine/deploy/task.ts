// The deploy task: one outbox row taken from `pending` to a terminal state, stage by stage in the
// same order every time (revalidate → provider → execution gate → lease → snapshot →
// integrity → deploying → legacy-secret purge → upload → read back → readiness gate → settle).
// Every durable step is fenced by the lease token; a runner killed at any line leaves a row that a
// later pass resumes (reconcile mode for a `deploying` version) without downgrading anything.
// The newest deploy of a Worker wins (docs/scheduling.md "Which deploy wins"): a row whose Worker has
// a newer version queued or deployed settles superseded — checked at the snapshot, again under the
// Worker's lock right before any upload, while waiting for readiness, and at the settle.
import {setTimeout as sleep} from 'node:timers/promises'
import {auditEntry, deterministicId, SYSTEM_ACTOR, type DEPLOY_SUPERSEDED} from '../../store/index.js'
import type {LeaseByIdResult, LeaseDisposition, NewerDeploy, OutboxRow, VersionRow, WorkerRow} from '../../store/index.js'
import {KitError} from '../../errors.js'
import {EDGE_HOST_FENCED} from '../../protocol/management-api.js'
import {pairingRefused, ProviderError, type EdgeProvider, type ScriptDetails} from '../../provider/types.js'
import {legacySecretPurgeBeforeDeploy} from '../capabilities.js'
import {verifyStoredVersion, type VerifiedVersion} from '../project/integrity.js'
import type {VersionDigests} from '../project/version-digests.js'
import {moduleTupleOf, type WorkerManifest} from '../project/manifest.js'
import {sendMissingAssets} from './assets-upload.js'
import {uploadInputOf} from './upload-input.js'
import {resolveServiceBindings, SERVICE_BINDING_INVALID} from './service-bindings.js'
import {sha256Hex} from '../../canonical-json.js'
import type {Engine} from '../context.js'
import {faultPoint} from '../faults.js'
import {supersededResult} from './superseded.js'
import {executionGate} from '../gates.js'
import {askedHost, retryCauseOf, retryPlan, type RetryCause} from '../retry.js'

export interface DeployTaskArgs {
  outboxId: string
  companyId: string
  departmentId: string
  /** The dispatch that carries this run (for logs); in-process runs use the outbox id. */
  messageId: string
  /** The row as the sweep that claimed it leased it: the task runs under that lease instead of taking one. */
  claim?: {row: OutboxRow}
}

export type DeployStage = 'lease' | 'snapshot' | 'integrity' | 'deploying' | 'purge' | 'upload' | 'readback' | 'readiness' | 'settle'

export type DeployTaskResult =
  | {outcome: 'completed'; versionId: string; releaseGeneration: string; scriptName: string; reconciled: boolean}
  | {outcome: 'failed' | 'uncertain'; code: string; message: string}
  /** A newer version of the Worker is queued or deployed: the row settled `cancelled` (`deploy_superseded`). */
  | {outcome: 'superseded'; code: typeof DEPLOY_SUPERSEDED; message: string; newerVersionId: string}
  | {outcome: 'retry'; code: string; message: string; exhausted: boolean}
  /** The execution gate is closed: the row was not touched, and runs once the gate opens. */
  | {outcome: 'retry_later'; message: string}
  | {outcome: 'skipped'; disposition: Exclude<LeaseDisposition, 'acquired'> | 'missing'}
  | {outcome: 'lease_lost'}

export interface DeployTaskOptions {
  onStage?: (stage: DeployStage) => void
}

/** Another deploy of the same Worker holds the upload; this row retries on the backoff ladder. */
export const WORKER_DEPLOY_BUSY = 'worker_deploy_busy'

export async function runDeployTask(engine: Engine, args: DeployTaskArgs, options: DeployTaskOptions = {}): Promise<DeployTaskResult> {
  const {claim: _claim, ...message} = args
  for (const [name, value] of Object.entries(message)) {
    if (typeof value !== 'string' || value.trim() === '') throw new TypeError(`deploy task argument ${name} must be a non-empty string`)
  }
  const stage = options.onStage ?? (() => {})
  const {store, settings, log} = engine

  const resolution = await engine.resolveProvider()
  const gate = await executionGate(engine, resolution)
  if (gate.closed) return {outcome: 'retry_later', message: gate.message}

  stage('lease')
  // An invalid provider has no scope of its own: lease under the row's, so the row can still settle (failed).
  const scope = gate.scope || ((await store.outbox.get(args.outboxId))?.dispatch_namespace ?? '')
  const lease = await leaseDeployRow(engine, args, scope)
  if (lease.disposition !== 'acquired') return {outcome: 'skipped', disposition: lease.disposition}
  const token = lease.row.lease_token!
  faultPoint('deploy.after_lease')

  stage('snapshot')
  const snapshot = await store.deployments.snapshot(args.outboxId, token)
  if (!snapshot) return {outcome: 'lease_lost'}
  const {worker, version, current} = snapshot
  const reconcileMode = version?.state === 'deploying'
  const ids = {outboxId: args.outboxId, leaseToken: token, workerId: worker?.id ?? null, versionId: version?.id ?? null}
  // Whether this run asked the host: the write that ends the lease counts one attempt then (../retry.ts).
  let asked = false
  const ask = async <T>(call: Promise<T>): Promise<T> => {
    try {
      const answer = await call
      asked = true
      return answer
    } catch (error) {
      asked ||= askedHost(error)
      throw error
    }
  }
  const finish = async (status: 'failed' | 'uncertain', code: string, message: string): Promise<DeployTaskResult> => {
    stage('settle')
    const settled = await store.deployments.finish({...ids, status, errorCode: code, error: message, attempted: asked})
    if (!settled) return {outcome: 'lease_lost'}
    log[status === 'failed' ? 'error' : 'warn']({outboxId: args.outboxId, code}, `Edge Worker deployment ${status}: ${message}`)
    return {outcome: status, code, message}
  }
  const retry = async (cause: RetryCause, code: string, message: string, keepDeploying: boolean, deferred = false): Promise<DeployTaskResult> => {
    const now = store.clock.now()
    const plan = retryPlan(settings.backoff, cause, {attempts: lease.row.attempts + (asked ? 1 : 0), waits: lease.row.waits}, now)
    // The lane that takes a rescheduled deploy (recovery, or deferred once the host refused it
    // fenced) leaves it alone for that lane's cooldown after this runner touched it.
    const cooldownSeconds = deferred ? settings.deferred.cooldown_seconds : settings.recovery.cooldown_seconds
    const when = plan.nextAttemptAt === null ? null : Math.max(plan.nextAttemptAt, now + cooldownSeconds * 1000)
    const outcome = await store.deployments.retryLater({
      ...ids,
      errorCode: code,
      error: message,
      nextAttemptAt: when,
      waits: plan.waits,
      attempted: asked,
      keepDeploying,
      deferred,
    })
    if (outcome === 'lease_lost') return {outcome: 'lease_lost'}
    log.warn({outboxId: args.outboxId, code, exhausted: outcome === 'failed'}, `Edge Worker deployment will retry: ${message}`)
    return {outcome: 'retry', code, message, exhausted: outcome === 'failed'}
  }
  const supersede = async (newer: NewerDeploy): Promise<DeployTaskResult> => {
    stage('settle')
    if (!(await store.deployments.supersede({...ids, workerId: worker!.id, versionId: version!.id, newer, attempted: asked}))) return {outcome: 'lease_lost'}
    return superseded(newer)
  }
  const superseded = (newer: NewerDeploy): DeployTaskResult => supersededResult(engine, args.outboxId, newer)

  if (resolution.status !== 'ready') {
    return finish(reconcileMode ? 'uncertain' : 'failed', resolution.code, resolution.message)
  }
  const provider = resolution.provider
  if (!worker) return finish('failed', 'worker_deleted', 'the Worker row no longer exists')
  if (!version || version.worker_id !== worker.id) return finish('failed', 'version_missing', 'the version row no longer exists')
  if (worker.company_id !== args.companyId || worker.department_id !== args.departmentId) {
    return finish('failed', 'deployment_arguments_mismatch', 'the task arguments do not match the Worker row')
  }
  if (snapshot.newer) return supersede(snapshot.newer)

  stage('integrity')
  const verified = await verifyStoredVersion(engine.artifacts, storedVersionOf(version), settings.deploy)
  if (!verified.ok) return finish('failed', verified.code, verified.reason)

  let uploaded: ScriptDetails | null = null
  if (reconcileMode) {
    // GET-only first: a previous attempt may have uploaded before it died.
    try {
      uploaded = await ask(readBack(provider, worker, version, verified))
    } catch (error) {
      if (error instanceof ProviderError) return retry(retryCauseOf(error), error.code, error.message, true)
      throw error
    }
    if (uploaded) log.info({outboxId: args.outboxId}, 'Edge Worker deployment reconciled: the host already serves this release')
  }

  if (!uploaded) {
    stage('deploying')
    const begun = await store.deployments.beginDeploying({...ids, workerId: worker.id, versionId: version.id})
    if (begun.outcome === 'lease_lost') return {outcome: 'lease_lost'}
    if (begun.outcome === 'superseded') return supersede(begun.newer)
    // The Worker and the holder's version are the holder's to settle: leave them as they are.
    if (begun.outcome === 'busy') return retry('wait', WORKER_DEPLOY_BUSY, `deploy ${begun.holder} of this Worker is in progress; this one waits for it`, true)
    faultPoint('deploy.after_commit_deploying')

    stage('purge')
    const purge = await purgeLegacySecrets(engine, provider, {worker, version, current, outbox: snapshot.outbox}, ask)
    if (purge) return finish('failed', purge.code, purge.message)

    stage('upload')
    let services: Map<string, string>
    try {
      services = await resolveServiceBindings(engine, worker.company_id, verified.manifest)
    } catch (error) {
      if (error instanceof KitError && error.reason === SERVICE_BINDING_INVALID) return finish('failed', SERVICE_BINDING_INVALID, error.message)
      throw error
    }
    try {
      // A large shard restart can outlast the lease: renew it meanwhile, so no other runner takes
      // the row over and uploads the same release a second time.
      await whileLeaseRenewed(engine, {outboxId: args.outboxId, token}, async () => {
        const assets = verified.bundle.assets
        if (assets) {
          const sent = await ask(sendMissingAssets(provider, engine.artifacts, assets, settings.deploy.asset_max_bytes))
          log.info({outboxId: args.outboxId, assetFiles: sent.files, assetBytes: sent.bytes}, 'asset files the host lacked were sent')
        }
        const beside = version.split ? await store.workers.getVersion(version.split.beside.version_id) : undefined
        return ask(provider.uploadScript(uploadInputOf(worker, version, beside, verified, services)))
      })
      faultPoint('deploy.after_upload')
    } catch (error) {
      if (!(error instanceof ProviderError)) throw error
      // A host that lost the pairing is paired again by an operator, and then takes this row: not a failure of the deploy.
      if (pairingRefused(error)) return retry('wait', error.code, error.message, false)
      if (error.kind === 'terminal') return finish('failed', error.code, error.message)
      // The host is fenced: the row waits for the deferred lane, which runs once the fence ends.
      if (error.kind === 'fenced') return retry('wait', EDGE_HOST_FENCED, error.message, false, true)
      if (error.kind === 'retryable') return retry(retryCauseOf(error), error.code, error.message, false)
      // Ambiguous: the upload may have landed. Reading back decides.
      log.warn({outboxId: args.outboxId, code: error.code}, 'Edge Worker upload outcome unknown; reading back')
    }

    stage('readback')
    try {
      uploaded = await ask(readBack(provider, worker, version, verified))
    } catch (error) {
      if (error instanceof ProviderError) return retry(retryCauseOf(error), error.code, error.message, true)
      throw error
    }
    if (!uploaded) return retry('failed_attempt', 'edge_host_readback_mismatch', 'the host does not hold the uploaded release after the upload', false)
    faultPoint('deploy.after_readback')
  }

  stage('readiness')
  const ready = await readinessGate(engine, provider, {
    outboxId: args.outboxId,
    token,
    scriptName: worker.script_name,
    versionId: version.id,
    releaseGeneration: version.release_generation,
  })
  if (ready === 'lease_lost') return {outcome: 'lease_lost'}
  if (typeof ready === 'object') return supersede(ready.superseded)
  if (ready === 'timeout') {
    return finish(
      'uncertain',
      'worker_readiness_timeout',
      `release ${version.release_generation} did not answer the readiness probe within ${settings.deploy.readiness_deadline_seconds}s`,
    )
  }

  stage('settle')
  faultPoint('deploy.before_settle')
  const completed = await store.deployments.complete({...ids, workerId: worker.id, versionId: version.id, scope: provider.scope, attempted: asked})
  if (completed.outcome === 'lease_lost') return {outcome: 'lease_lost'}
  if (completed.outcome === 'superseded') return superseded(completed.newer)
  log.info({outboxId: args.outboxId, scriptName: worker.script_name, releaseGeneration: version.release_generation}, 'Edge Worker deployment completed')
  return {outcome: 'completed', versionId: version.id, releaseGeneration: version.release_generation, scriptName: worker.script_name, reconciled: reconcileMode}
}

/** The deploy task's lease step: the lease the claiming sweep took, or one taken by id (a waiting `deploy`, a restore's verification). */
export async function leaseDeployRow(engine: Engine, args: DeployTaskArgs, scope: string): Promise<LeaseByIdResult> {
  if (args.claim) return {disposition: 'acquired', row: args.claim.row}
  return engine.store.outbox.leaseById(args.outboxId, {scope, owner: engine.owner, leaseSeconds: engine.settings.deploy.lease_seconds})
}

/**
 * The host's copy of the script when it is exactly this release (generation and module digests) with
 * the version's split (the release kept beside it, and the shares), else null.
 */
async function readBack(provider: EdgeProvider, worker: WorkerRow, version: VersionRow, verified: VerifiedVersion): Promise<ScriptDetails | null> {
  const details = await provider.getScript(worker.script_name)
  if (!details || details.releaseGeneration !== verified.receipt.releaseGeneration) return null
  const split = version.split
  if ((details.split?.releaseGeneration ?? null) !== (split?.beside.release_generation ?? null)) return null
  if (split && details.split?.percentage !== split.beside.percentage) return null
  for (const module of verified.bundle.modules) {
    if (details.moduleDigests[module.name] !== sha256Hex(module.content)) return null
  }
  return details
}

/**
 * Probes readiness for the uploaded release generation until the deadline. Each probe is bounded
 * (probe timeout, or what is left of the deadline) and asks the host to wait for the release to go
 * live for half of that, so the gate learns it serves as soon as it does; probes start at most once
 * per probe interval (a host that answers at once is not hammered). The lease is revalidated before
 * and after each probe so a runner that lost the row stops at once. A probe that throws counts as not
 * ready. After a probe that was not ready, a host that holds another release while a newer version of
 * the Worker is queued or deployed means ours was replaced: it will never answer, so stop at once.
 */
async function readinessGate(
  engine: Engine,
  provider: EdgeProvider,
  target: {outboxId: string; token: string; scriptName: string; versionId: string; releaseGeneration: string},
): Promise<'ready' | 'timeout' | 'lease_lost' | {superseded: NewerDeploy}> {
  const {deploy} = engine.settings
  const deadline = Date.now() + deploy.readiness_deadline_seconds * 1000
  const renew = () => engine.store.outbox.renewLease(target.outboxId, target.token, {leaseSeconds: deploy.lease_seconds})
  while (Date.now() < deadline) {
    if (!(await renew())) return 'lease_lost'
    const probeStarted = Date.now()
    const budget = Math.max(1, Math.min(deploy.readiness_probe_timeout_seconds * 1000, deadline - probeStarted))
    const ready = await provider
      .probeReadiness(target.scriptName, target.releaseGeneration, {waitMs: budget / 2, signal: AbortSignal.timeout(budget)})
      .catch(() => false)
    if (!(await renew())) return 'lease_lost'
    if (ready) return 'ready'
    const held = await provider.getScript(target.scriptName).catch(() => null)
    if (held && held.releaseGeneration !== target.releaseGeneration) {
      const newer = await engine.store.deployments.newerDeploy(target.versionId)
      if (newer) return {superseded: newer}
    }
    await sleep(Math.min(probeStarted + deploy.readiness_probe_interval_ms, deadline) - Date.now())
  }
  return 'timeout'
}

/**
 * A release built before v2.6 has no Worker secrets, so it must not inherit the ones the deployed
 * v2.6+ release may hold: purge them first and record it. null = nothing to do or done.
 */
async function purgeLegacySecrets(
  engine: Engine,
  provider: EdgeProvider,
  rows: {worker: WorkerRow; version: VersionRow; current: VersionRow | undefined; outbox: OutboxRow},
  ask: <T>(call: Promise<T>) => Promise<T>,
): Promise<{code: string; message: string} | null> {
  const deployed = rows.current && rows.current.id !== rows.version.id && rows.current.state === 'deployed' ? rows.current : undefined
  if (!legacySecretPurgeBeforeDeploy(rows.version.builder_policy, deployed?.builder_policy ?? null)) return null
  try {
    await ask(provider.purgeSecrets(rows.worker.script_name))
  } catch (error) {
    if (!(error instanceof ProviderError)) throw error
    return error.kind === 'terminal'
      ? {code: 'artifact_integrity_failed', message: `secrets purge before a legacy deploy was not confirmed: ${error.message}`}
      : {code: 'deployment_internal_error', message: `secrets purge before a legacy deploy failed: ${error.message}`}
  }
  const facts = {fromReleaseGeneration: deployed!.release_generation, toReleaseGeneration: rows.version.release_generation, scriptName: rows.worker.script_name}
  const action = 'secrets.purged_before_legacy_deploy'
  await engine.store.audit.append(
    auditEntry({
      id: deterministicId(action, rows.outbox.id),
      action,
      resource: {type: 'edge_worker', id: rows.worker.id},
      actor: SYSTEM_ACTOR,
      digest: true,
      facts,
    }),
  )
  return null
}

export function storedVersionOf(version: VersionRow) {
  const receipt = version.receipt as Partial<VersionDigests>
  const manifest = version.manifest as unknown as WorkerManifest
  let moduleTuple: string[] = []
  try {
    moduleTuple = moduleTupleOf(manifest)
  } catch {
    // A manifest too broken to list modules fails the manifest check inside verification.
  }
  return {
    manifest: version.manifest,
    receipt: version.receipt,
    moduleTuple,
    digests: {...(receipt as VersionDigests), projectDigest: version.project_digest, bundleDigest: version.bundle_digest},
    releaseGeneration: version.release_generation,
    projectKey: version.project_artifact_key,
    bundleKey: version.bundle_artifact_key,
  }
}

/** Runs `work` while renewing the row's lease every third of its length (a lost lease is noticed at the next fenced write). */
async function whileLeaseRenewed<T>(engine: Engine, lease: {outboxId: string; token: string}, work: () => Promise<T>): Promise<T> {
  const {lease_seconds: leaseSeconds} = engine.settings.deploy
  const timer = setInterval(
    () => void engine.store.outbox.renewLease(lease.outboxId, lease.token, {leaseSeconds}).catch(() => false),
    (leaseSeconds * 1000) / 3,
  )
  try {
    return await work()
  } finally {
    clearInterval(timer)
  }
}
