// Turning a project directory into a committed version. Artifact-cleanup intents are recorded
// before any artifact is written, so a submission that dies half-way leaves intents that clean up
// after it; the version commit adopts (cancels) them in the same transaction.
import path from 'node:path'
import {KitError} from '../../errors.js'
import {newId, scriptNameFor, type VersionRow, type VersionSplit, type WorkerRow} from '../../store/index.js'
import type {ArtifactKind} from '../../artifacts/store.js'
import {artifactKeyFor} from '../../artifacts/store.js'
import type {Engine} from '../context.js'
import {faultPoint} from '../faults.js'
import {buildProject, type BuiltProject, type BuiltVersion} from '../project/build.js'
import type {ProjectSource, ProjectSourceOptions} from '../project/source.js'
import {storeAssets} from '../project/assets/store.js'
import {resolveServiceBindings} from './service-bindings.js'
import {percentageSplit} from '../versions/deployment-spec.js'

export interface SubmitResult {
  worker: WorkerRow
  version: VersionRow
  /** What the project was read from, and the notes its build left (ignored wrangler keys, …). */
  source: ProjectSource
  /** true: this Worker already had a version with the same release generation; nothing was written. */
  reused: boolean
}

export function cleanupDedupeKey(artifactId: string): string {
  return `artifact-cleanup:${artifactId}`
}

export interface SubmitInput {
  projectDir: string
  /** Default: the department a wrangler config's [edgeworkers] table names. */
  departmentId?: string
  scope: string
  source?: ProjectSourceOptions
  /** With a wrangler env: deploy it onto the production department's Worker all the same. */
  ontoProduction?: boolean
  /** Recorded on a new version (a reused one keeps its own). */
  notes?: VersionNotes
  /** `deploy --percentage P`: the new version serves P % beside the version served now (a gradual deployment). */
  percentage?: number
}

/** What the operator says about a version: `deploy --message/--tag`, and who they are. */
export interface VersionNotes {
  message?: string
  tag?: string
  /** The operator's login name. */
  author?: string
}

export async function submitVersion(engine: Engine, input: SubmitInput): Promise<SubmitResult> {
  const {store} = engine
  const built = await buildProject(input.projectDir, engine.settings.deploy, input.source, {hostExperimental: await hostExperimentalMode(engine)})
  const departmentId = deployDepartment(built.source, input)
  const department = await store.tenants.getDepartment(departmentId)
  if (!department || department.deleted_at !== null) throw new KitError('not_found', `department ${departmentId} not found`)

  await resolveServiceBindings(engine, department.company_id, built.manifest)
  const existingWorker = await store.workers.getByDepartment(department.id)
  if (existingWorker?.status === 'retired') {
    throw new KitError('conflict', `the Worker of department ${department.id} is retired; retirement is permanent`, 'edge_host_script_retired')
  }
  const split = await splitOf(engine, existingWorker, built, input.percentage)
  if (existingWorker) {
    // The same release again is the same version while it is the Worker's newest and serves or is on
    // its way. Otherwise it gets a new version — the newest, which wins (docs/scheduling.md): deploying
    // an older release again (a rollback) really deploys, even over a newer version still queued.
    const newest = await store.deployments.newestVersion(existingWorker.id)
    const live =
      newest?.release_generation === built.releaseGeneration &&
      (newest.id === existingWorker.current_version_id || newest.state === 'built' || newest.state === 'deploying')
    // …at the same percentages: another split of it is a new version, which wins as the newest.
    if (live && JSON.stringify(newest.split) === JSON.stringify(split)) return {worker: existingWorker, version: newest, reused: true, source: built.source}
  }

  const versionId = newId()
  const artifacts: Array<{kind: ArtifactKind; bytes: Buffer; digest: string}> = [
    {kind: 'project', bytes: built.projectArchive, digest: built.digests.projectDigest},
    {kind: 'bundle', bytes: built.bundle, digest: built.digests.bundleDigest},
  ]
  const intentKeys = artifacts.map((artifact) => cleanupDedupeKey(`${versionId}:${artifact.kind}`))
  const graceMs = engine.settings.artifact_cleanup.grace_seconds * 1000
  for (const [index, artifact] of artifacts.entries()) {
    await store.outbox.enqueue({
      operation: 'artifact_cleanup',
      dedupe_key: intentKeys[index]!,
      dispatch_namespace: input.scope,
      company_id: department.company_id,
      department_id: department.id,
      worker_id: existingWorker?.id ?? null,
      version_id: versionId,
      payload: {kind: artifact.kind, object_key: artifactKeyFor(artifact.kind, artifact.digest), digest: artifact.digest},
      next_attempt_at: store.clock.now() + graceMs,
    })
  }
  faultPoint('submit.after_intents')

  try {
    for (const artifact of artifacts) await engine.artifacts.put(artifact.kind, artifact.bytes)
    if (built.assets) await storeAssets(engine.artifacts, built.assets)
    faultPoint('submit.after_artifacts')
    const workerId = existingWorker?.id ?? newId()
    const worker: WorkerRow = existingWorker ?? {
      id: workerId,
      company_id: department.company_id,
      department_id: department.id,
      script_name: scriptNameFor(department.company_id, department.id),
      status: 'new',
      current_version_id: null,
      serving_scope: null,
      base_revision: 0,
      created_at: store.clock.now(),
      updated_at: store.clock.now(),
      retired_at: null,
    }
    const version = await store.deployments.commitVersion({
      worker,
      createWorker: !existingWorker,
      version: {...versionInputOf(versionId, workerId, built), ...notesOf(input, built), split},
      intentDedupeKeys: intentKeys,
    })
    return {worker: (await store.workers.get(workerId)) ?? worker, version, reused: false, source: built.source}
  } catch (error) {
    await store.deployments.makeIntentsDue(intentKeys).catch(() => 0)
    throw error
  }
}

/** The split a `--percentage` deploy asks for (null: the build alone at 100 %); refused with one line before anything is written. */
async function splitOf(engine: Engine, worker: WorkerRow | undefined, built: BuiltProject, percentage: number | undefined): Promise<VersionSplit | null> {
  if (percentage === undefined || percentage === 100) return null
  if (!worker) throw new KitError('usage', 'the first deploy of a Worker serves 100 %: there is no version to split with')
  const versions = await engine.store.workers.listVersions(worker.id)
  const current = versions.find((version) => version.id === worker.current_version_id)
  const candidate = {id: 'the new build', release_generation: built.releaseGeneration, manifest: built.manifest as never, created_at: Number.MAX_SAFE_INTEGER}
  return percentageSplit(candidate, versions, current, percentage)
}

export function versionInputOf(id: string, workerId: string, built: BuiltVersion) {
  return {
    id,
    worker_id: workerId,
    release_generation: built.releaseGeneration,
    builder_policy: built.manifest.builderPolicy,
    project_artifact_key: artifactKeyFor('project', built.digests.projectDigest),
    project_digest: built.digests.projectDigest,
    bundle_artifact_key: artifactKeyFor('bundle', built.digests.bundleDigest),
    bundle_digest: built.digests.bundleDigest,
    manifest: built.manifest as never,
    receipt: built.receipt as never,
    asset_digests: built.assets?.files.map((file) => file.sha256) ?? [],
  }
}

function notesOf(input: SubmitInput, built: BuiltProject) {
  const {file, kind, env} = built.source
  return {
    message: input.notes?.message ?? null,
    tag: input.notes?.tag ?? null,
    author: input.notes?.author ?? null,
    source: {projectDir: path.resolve(input.projectDir), file, kind, env},
    size_bytes: built.projectArchive.byteLength + built.bundle.byteLength,
  }
}

/**
 * The department a deploy lands on. wrangler deploys an env as its own Worker; on-prem a Worker is its
 * department's, so an env deployed onto the production department would replace production: refused unless asked.
 */
function deployDepartment(source: ProjectSource, input: SubmitInput): string {
  const departmentId = input.departmentId ?? source.department
  if (!departmentId) {
    const table = source.env === null ? '[edgeworkers] table' : `[env.${source.env}.edgeworkers] table`
    throw new KitError('usage', `which department? give --department (or department in the wrangler config's ${table})`)
  }
  if (source.env !== null && departmentId === source.productionDepartment && !input.ontoProduction)
    throw new KitError(
      'usage',
      `--env ${source.env} would replace the production Worker of ${departmentId} (the top level's [edgeworkers] department); deploy the env to its own department (default ${departmentId}-${source.env}) or pass --onto-production`,
    )
  return departmentId
}

/** How long a deploy waits to learn the host's mode before building without it. */
const HOST_MODE_TIMEOUT_MS = 3_000

/**
 * Whether the paired host runs workerd's experimental mode, so the build refuses a flag the host
 * would. Undefined when no host answers: a host that is down costs waiting, not the deploy, and the
 * host still judges the upload.
 */
async function hostExperimentalMode(engine: Engine): Promise<boolean | undefined> {
  const resolution = await engine.resolveProvider()
  if (resolution.status !== 'ready') return undefined
  const host = await resolution.provider.describeHost(AbortSignal.timeout(HOST_MODE_TIMEOUT_MS)).catch(() => null)
  return host?.experimental
}
