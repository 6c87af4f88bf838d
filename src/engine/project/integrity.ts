// Integrity verification of a stored version, run by the deploy task before anything is uploaded.
// Everything is recomputed from what was read back — the manifest on the version row and the
// artifact bytes — and compared with the version row and the build receipt. The first mismatch
// is reported as `artifact_integrity_failed` with one line naming what differed.
import {canonicalDigest, canonicalJson} from '../../canonical-json.js'
import {ArtifactError, parseArtifactKey, type ArtifactKind, type ArtifactProblem, type ArtifactStore} from '../../artifacts/store.js'
import {KitError} from '../../errors.js'
import {readProjectArchive} from './archive.js'
import {oversizeArtifactMessage, type ArtifactLimits} from './build.js'
import {assetFilesProblem} from './assets/store.js'
import {parseBundle, type WorkerBundle} from './bundle.js'
import {LOCK_FILE, mainModuleNameOf, MANIFEST_FILE, moduleTupleOf, parseLock, parseManifest, type WorkerLock, type WorkerManifest} from './manifest.js'
import {RECEIPT_KEYS, RECEIPT_VERSION, receiptSchema, type BuildReceipt, type StoredReceipt} from './receipt.js'
import {releaseGenerationOf} from './release-generation.js'
import {artifactDigestsOf, contentDigestsOf, DIGEST_NAMES, sbomOf, type DigestName, type VersionDigests} from './version-digests.js'
import {parseStrictJson} from '../../util/strict-json.js'

export const ARTIFACT_INTEGRITY_FAILED = 'artifact_integrity_failed'

/** Which check failed, for logs and tests; the outbox code is always ARTIFACT_INTEGRITY_FAILED. */
export type IntegrityCheck =
  | 'artifact_key'
  | 'artifact_missing'
  | 'artifact_size'
  | 'receipt_keys'
  | 'receipt_version'
  | 'receipt'
  | 'manifest'
  | 'project_archive'
  | 'bundle'
  | 'module_tuple'
  | 'digest'
  | 'release_generation'

export interface IntegrityFailure {
  ok: false
  code: typeof ARTIFACT_INTEGRITY_FAILED
  check: IntegrityCheck
  /** One line naming what mismatched. */
  reason: string
}

export interface VerifiedVersion {
  ok: true
  manifest: WorkerManifest
  receipt: BuildReceipt
  /** The verified bundle, decoded: these are the modules to upload. */
  bundle: WorkerBundle
}

/** What the version row records. `manifest` and `receipt` are as stored (JSON), not yet trusted. */
export interface RecordedVersion {
  manifest: unknown
  receipt: unknown
  moduleTuple: readonly string[]
  digests: VersionDigests
  /** The release generation the version row records (what the host is told and probed for). */
  releaseGeneration: string
}

export interface VersionIntegrityInput extends RecordedVersion {
  projectBytes: Uint8Array
  bundleBytes: Uint8Array
  limits: ArtifactLimits
}

export interface StoredVersion extends RecordedVersion {
  projectKey: string
  bundleKey: string
}

/** Reads the version's artifacts back (size-limited, SHA-256 checked) and verifies everything. */
export async function verifyStoredVersion(store: ArtifactStore, version: StoredVersion, limits: ArtifactLimits): Promise<VerifiedVersion | IntegrityFailure> {
  return runChecks(async () => {
    const projectBytes = await readArtifact(store, version.projectKey, 'project', version.digests.projectDigest, limits)
    const bundleBytes = await readArtifact(store, version.bundleKey, 'bundle', version.digests.bundleDigest, limits)
    const verified = await verify({...version, projectBytes, bundleBytes, limits})
    // The bundle digest covers the asset manifest; each file must still be what it names.
    const problem = verified.bundle.assets && (await assetFilesProblem(store, verified.bundle.assets, limits.asset_max_bytes))
    if (problem) fail(checkForArtifactProblem[problem.reason], problem.message)
    return verified
  })
}

/** Verifies a version against artifact bytes already read back. */
export async function verifyVersionIntegrity(input: VersionIntegrityInput): Promise<VerifiedVersion | IntegrityFailure> {
  return runChecks(() => verify(input))
}

/** Thrown by a check to stop at the first failure; never escapes this module. */
class IntegrityViolation extends Error {
  constructor(
    readonly check: IntegrityCheck,
    reason: string,
  ) {
    super(reason)
  }
}

function fail(check: IntegrityCheck, reason: string): never {
  throw new IntegrityViolation(check, reason)
}

async function runChecks(checks: () => Promise<VerifiedVersion>): Promise<VerifiedVersion | IntegrityFailure> {
  try {
    return await checks()
  } catch (error) {
    if (!(error instanceof IntegrityViolation)) throw error
    return {ok: false, code: ARTIFACT_INTEGRITY_FAILED, check: error.check, reason: error.message}
  }
}

const checkForArtifactProblem: Readonly<Record<ArtifactProblem, IntegrityCheck>> = {
  artifact_key_invalid: 'artifact_key',
  artifact_missing: 'artifact_missing',
  artifact_too_large: 'artifact_size',
  artifact_corrupt: 'digest',
}

/** The artifact's bytes; its key must name the digest the version records for it. */
async function readArtifact(store: ArtifactStore, key: string, kind: ArtifactKind, recordedDigest: string, limits: ArtifactLimits): Promise<Buffer> {
  const named = parseArtifactKey(key)
  if (named?.kind !== kind || named.sha256 !== recordedDigest) {
    fail('artifact_key', `${kind} artifact key ${key} does not name the recorded digest ${short(recordedDigest)}`)
  }
  const maxBytes = kind === 'project' ? limits.project_archive_max_bytes : limits.bundle_max_bytes
  try {
    return await store.get(key, maxBytes)
  } catch (error) {
    if (!(error instanceof ArtifactError)) throw error // I/O trouble is not an integrity verdict
    return fail(checkForArtifactProblem[error.reason], error.message)
  }
}

async function verify(input: VersionIntegrityInput): Promise<VerifiedVersion> {
  const {projectBytes, bundleBytes} = input
  const oversize = oversizeArtifactMessage(projectBytes, bundleBytes, input.limits)
  if (oversize) fail('artifact_size', `${oversize} (read back)`)

  const receipt = checkReceipt(input.receipt)
  for (const name of DIGEST_NAMES) {
    if (input.digests[name] !== receipt[name]) {
      const recorded = short(input.digests[name])
      fail('digest', `${name} on the version (${recorded}) differs from the build receipt (${short(receipt[name])})`)
    }
  }
  const artifactDigests = artifactDigestsOf(projectBytes, bundleBytes)
  compareDigest('projectDigest', receipt, artifactDigests.projectDigest, 'the project archive read back')
  compareDigest('bundleDigest', receipt, artifactDigests.bundleDigest, 'the bundle read back')

  const manifest = checkManifest(input.manifest)
  if (receipt.builderPolicy !== manifest.builderPolicy) {
    const policies = `${receipt.builderPolicy} differs from the manifest's ${manifest.builderPolicy}`
    fail('receipt', `build receipt builderPolicy ${policies}`)
  }
  const lock = await checkProjectArchive(projectBytes, manifest)
  const bundle = checkBundle(bundleBytes, manifest, input.moduleTuple)

  const sbom = sbomOf(manifest, lock, bundle.modules)
  const content = contentDigestsOf(manifest, lock, sbom)
  compareDigest('manifestDigest', receipt, content.manifestDigest, 'the manifest')
  compareDigest('lockDigest', receipt, content.lockDigest, `the ${LOCK_FILE} in the project archive`)
  compareDigest('dependencyDigest', receipt, content.dependencyDigest, "the manifest's dependencies")
  compareDigest('staticDataDigest', receipt, content.staticDataDigest, "the manifest's staticData")
  compareDigest('sbomDigest', receipt, content.sbomDigest, 'the SBOM rebuilt from the manifest, lock and bundle')
  // The receipt also carries the SBOM and static data themselves; they must be what was digested.
  if (canonicalDigest(receipt.staticData) !== receipt.staticDataDigest) {
    fail('receipt', 'build receipt staticData does not hash to its staticDataDigest')
  }
  if (canonicalDigest(receipt.sbom) !== receipt.sbomDigest) {
    fail('receipt', 'build receipt sbom does not hash to its sbomDigest')
  }

  const releaseGeneration = releaseGenerationOf(receipt)
  const recomputed = `does not match the recomputed ${releaseGeneration}`
  if (receipt.releaseGeneration !== releaseGeneration) {
    fail('release_generation', `build receipt release generation ${receipt.releaseGeneration} ${recomputed}`)
  }
  if (input.releaseGeneration !== releaseGeneration) {
    fail('release_generation', `release generation ${input.releaseGeneration} on the version ${recomputed}`)
  }
  // receipt.sbom hashes to the SBOM rebuilt here, so the typed rebuild stands in for it.
  return {ok: true, manifest, receipt: {...receipt, sbom}, bundle}
}

function checkReceipt(value: unknown): StoredReceipt {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    fail('receipt_keys', 'build receipt is not a JSON object')
  }
  const keys = Object.keys(value)
  const expected: readonly string[] = RECEIPT_KEYS
  const missing = expected.filter((key) => !keys.includes(key))
  const unexpected = keys.filter((key) => !expected.includes(key)).sort()
  if (missing.length > 0 || unexpected.length > 0) {
    const parts = [missing.length > 0 ? `missing ${missing.join(', ')}` : '', unexpected.length > 0 ? `unexpected ${unexpected.join(', ')}` : ''].filter(
      Boolean,
    )
    fail('receipt_keys', `build receipt key set is wrong: ${parts.join('; ')}`)
  }
  const version = (value as {receiptVersion?: unknown}).receiptVersion
  if (version !== RECEIPT_VERSION) {
    fail('receipt_version', `build receipt version is ${JSON.stringify(version)}; expected ${JSON.stringify(RECEIPT_VERSION)}`)
  }
  const parsed = receiptSchema.safeParse(value)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    fail('receipt', `build receipt key "${issue.path.join('.')}" ${issue.message}`)
  }
  return parsed.data
}

function checkManifest(value: unknown): WorkerManifest {
  try {
    return parseManifest(value, 'stored manifest')
  } catch (error) {
    if (error instanceof KitError) fail('manifest', error.message)
    throw error
  }
}

/** The archive must hold the same manifest; its lock file (if any) is what lockDigest covers. */
async function checkProjectArchive(projectBytes: Uint8Array, manifest: WorkerManifest): Promise<WorkerLock | null> {
  let files: Awaited<ReturnType<typeof readProjectArchive>>
  try {
    files = await readProjectArchive(projectBytes)
  } catch (error) {
    return fail('project_archive', `project archive cannot be read: ${(error as Error).message}`)
  }
  const archived = new Map(files.map((file) => [file.path, file.bytes]))
  const manifestBytes = archived.get(MANIFEST_FILE)
  if (!manifestBytes) fail('project_archive', `project archive has no ${MANIFEST_FILE}`)
  const archivedManifest = parseArchivedJson(manifestBytes, MANIFEST_FILE)
  if (canonicalJson(archivedManifest) !== canonicalJson(manifest)) {
    fail('manifest', `the ${MANIFEST_FILE} in the project archive differs from the stored manifest`)
  }
  const lockBytes = archived.get(LOCK_FILE)
  if (!lockBytes) return null
  try {
    return parseLock(parseArchivedJson(lockBytes, LOCK_FILE), `${LOCK_FILE} in the project archive`)
  } catch (error) {
    if (error instanceof KitError) fail('project_archive', error.message)
    throw error
  }
}

function parseArchivedJson(bytes: Buffer, name: string): unknown {
  try {
    return parseStrictJson(bytes)
  } catch {
    return fail('project_archive', `the ${name} in the project archive is not valid JSON`)
  }
}

/** The bundle must decode, carry exactly the manifest's modules in tuple order, and agree on the rest. */
function checkBundle(bundleBytes: Uint8Array, manifest: WorkerManifest, recordedTuple: readonly string[]): WorkerBundle {
  let bundle: WorkerBundle
  try {
    bundle = parseBundle(bundleBytes)
  } catch (error) {
    if (error instanceof KitError) fail('bundle', error.message)
    throw error
  }
  const expectedTuple = moduleTupleOf(manifest)
  if (!sameList(recordedTuple, expectedTuple)) {
    fail('module_tuple', `recorded module tuple ${formatList(recordedTuple)} differs from the manifest's ${formatList(expectedTuple)}`)
  }
  const bundled = bundle.modules.map((module) => module.name)
  if (!sameList(bundled, expectedTuple)) {
    fail('module_tuple', `bundle modules ${formatList(bundled)} differ from the manifest's ${formatList(expectedTuple)}`)
  }
  if (bundle.mainModule !== mainModuleNameOf(manifest)) {
    fail('bundle', `bundle main module ${bundle.mainModule} is not the manifest's ${mainModuleNameOf(manifest)}`)
  }
  if (bundle.compatibilityDate !== manifest.compatibilityDate) {
    fail('bundle', `bundle compatibilityDate ${bundle.compatibilityDate} is not the manifest's ${manifest.compatibilityDate}`)
  }
  if (canonicalJson(bundle.durableObjects) !== canonicalJson(manifest.durableObjects ?? [])) {
    fail('bundle', "bundle durableObjects differ from the manifest's")
  }
  if ((bundle.assets === null) !== (manifest.assets === undefined)) {
    fail('bundle', bundle.assets === null ? 'the manifest names assets the bundle does not list' : 'the bundle lists assets the manifest does not name')
  }
  return bundle
}

function compareDigest(name: DigestName, receipt: VersionDigests, recomputed: string, source: string): void {
  if (receipt[name] !== recomputed) {
    fail('digest', `${name} mismatch: the receipt says ${short(receipt[name])}, ${source} gives ${short(recomputed)}`)
  }
}

function short(digest: string): string {
  return `${digest.slice(0, 12)}…`
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((value, index) => value === b[index])
}

function formatList(values: readonly string[]): string {
  return `[${values.join(', ')}]`
}
