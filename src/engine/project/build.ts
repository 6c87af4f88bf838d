// Builds a version from a Worker project directory: the project archive, the bundle, the SBOM,
// the seven digests, the build receipt and the release generation, once the Worker has started in a
// throwaway workerd (./check.ts). Pure with respect to the kit's state: it reads the project and
// writes nothing (the caller records cleanup intents, then stores the artifacts).
import type {Settings} from '../../config/schema.js'
import {overLimitMessage} from '../../artifacts/size.js'
import {KitError} from '../../errors.js'
import {createProjectArchive} from './archive.js'
import {collectAssets, type CollectedAssets} from './assets/collect.js'
import {encodeBundle, parseBundle} from './bundle.js'
import {checkWorkerStarts} from './check.js'
import {loadWorkerProject, moduleEntriesOf, moduleTupleOf, type WorkerLock, type WorkerManifest} from './manifest.js'
import {buildReceiptOf, type BuildReceipt} from './receipt.js'
import {withProjectSource, type ProjectSource, type ProjectSourceOptions} from './source.js'
import {artifactDigestsOf, contentDigestsOf, sbomOf, type Sbom, type VersionDigests} from './version-digests.js'

/** The artifact size limits, as configured under `[deploy]`. */
export type ArtifactLimits = Pick<
  Settings['deploy'],
  'project_archive_max_bytes' | 'bundle_max_bytes' | 'project_files_max_bytes' | 'assets_max_files' | 'asset_max_bytes'
>

export interface BuiltVersion {
  manifest: WorkerManifest
  lock: WorkerLock | null
  /** Module names in bundle order: main first, then the rest sorted. */
  moduleTuple: string[]
  projectArchive: Buffer
  bundle: Buffer
  sbom: Sbom
  digests: VersionDigests
  receipt: BuildReceipt
  releaseGeneration: string
  /** The static assets (manifest.assets), or null when the Worker has none. */
  assets: CollectedAssets | null
}

export interface BuiltProject extends BuiltVersion {
  source: ProjectSource
}

/**
 * `hostExperimental`: whether the host the version is for runs workerd's experimental mode, when
 * known; the build's start check runs in that mode, so a flag the host would refuse is refused here.
 * Unknown (no host answered, or a dry run), the check allows experimental flags: the host decides.
 */
export interface BuildOptions {
  hostExperimental?: boolean
}

/** Builds an edgeworker.json or wrangler project (./source.ts). */
export async function buildProject(
  projectDir: string,
  limits: ArtifactLimits,
  options: ProjectSourceOptions = {},
  build: BuildOptions = {},
): Promise<BuiltProject> {
  return withProjectSource(projectDir, {...options, bundleMaxBytes: limits.bundle_max_bytes}, async (dir, source) => ({
    ...(await buildVersion(dir, limits, build)),
    source,
  }))
}

export async function buildVersion(projectDir: string, limits: ArtifactLimits, build: BuildOptions = {}): Promise<BuiltVersion> {
  const project = await loadWorkerProject(projectDir, limits.project_files_max_bytes)
  const {manifest, lock} = project
  const projectArchive = createProjectArchive(project.files)
  const assets = manifest.assets ? await collectAssets(project.root, manifest.assets, limits) : null
  const bundle = encodeBundle(manifest, project.modules, assets)
  const oversize = oversizeArtifactMessage(projectArchive, bundle, limits)
  if (oversize) throw new KitError('usage', oversize)
  await checkWorkerStarts(manifest, parseBundle(bundle), {experimental: build.hostExperimental ?? true})

  const entries = moduleEntriesOf(manifest)
  // Named as the bundle names them: the integrity check rebuilds the SBOM from the bundle.
  const sbom = sbomOf(
    manifest,
    lock,
    project.modules.map((file, index) => ({name: entries[index]!.name, content: file.bytes})),
  )
  const digests: VersionDigests = {...artifactDigestsOf(projectArchive, bundle), ...contentDigestsOf(manifest, lock, sbom)}
  const receipt = buildReceiptOf(manifest, digests, sbom)
  return {
    manifest,
    lock,
    moduleTuple: moduleTupleOf(manifest),
    projectArchive,
    bundle,
    sbom,
    digests,
    receipt,
    releaseGeneration: receipt.releaseGeneration,
    assets,
  }
}

/** The line for the first artifact over its limit, or null. Build and read-back share this rule. */
export function oversizeArtifactMessage(projectArchive: Uint8Array, bundle: Uint8Array, limits: ArtifactLimits): string | null {
  if (projectArchive.byteLength > limits.project_archive_max_bytes) {
    return overLimitMessage('project archive', projectArchive.byteLength, limits.project_archive_max_bytes)
  }
  if (bundle.byteLength > limits.bundle_max_bytes) {
    return overLimitMessage('bundle', bundle.byteLength, limits.bundle_max_bytes)
  }
  return null
}
