// The seven digests of a version, each defined once here and used by both the build and the
// integrity check. All are 64-hex SHA-256:
//
//   projectDigest     SHA-256 of the project archive bytes (also the archive's artifact key)
//   bundleDigest      SHA-256 of the bundle bytes (themselves canonical JSON; also its artifact key)
//   dependencyDigest  canonicalDigest(manifest.dependencies ?? {})
//   lockDigest        canonicalDigest(edgeworker.lock.json parsed, or null when there is none)
//   manifestDigest    canonicalDigest(manifest)  — the validated edgeworker.json object
//   sbomDigest        canonicalDigest(sbom)      — see sbomOf
//   staticDataDigest  canonicalDigest(manifest.staticData ?? {})
import {canonicalDigest, sha256Hex} from '../../canonical-json.js'
import type {JsonObject, WorkerLock, WorkerManifest} from './manifest.js'

export const DIGEST_NAMES = ['projectDigest', 'bundleDigest', 'dependencyDigest', 'lockDigest', 'manifestDigest', 'sbomDigest', 'staticDataDigest'] as const
export type DigestName = (typeof DIGEST_NAMES)[number]
export type VersionDigests = Record<DigestName, string>

export type ArtifactDigests = Pick<VersionDigests, 'projectDigest' | 'bundleDigest'>
export type ContentDigests = Omit<VersionDigests, keyof ArtifactDigests>

/** A small CycloneDX document: the dependencies as declared (resolved by the lock when it has them) and the modules. */
export interface Sbom {
  bomFormat: 'CycloneDX'
  specVersion: '1.5'
  version: 1
  metadata: {component: {type: 'application'; name: string}}
  components: SbomComponent[]
}

export type SbomComponent =
  | {type: 'library'; 'bom-ref': string; name: string; version: string}
  | {type: 'file'; 'bom-ref': string; name: string; hashes: [{alg: 'SHA-256'; content: string}]}

export function artifactDigestsOf(projectArchive: Uint8Array, bundle: Uint8Array): ArtifactDigests {
  return {projectDigest: sha256Hex(projectArchive), bundleDigest: sha256Hex(bundle)}
}

export function contentDigestsOf(manifest: WorkerManifest, lock: WorkerLock | null, sbom: Sbom): ContentDigests {
  return {
    dependencyDigest: canonicalDigest(manifest.dependencies ?? {}),
    lockDigest: canonicalDigest(lock),
    manifestDigest: canonicalDigest(manifest),
    sbomDigest: canonicalDigest(sbom),
    staticDataDigest: canonicalDigest(staticDataOf(manifest)),
  }
}

/** The static data a version carries: the manifest's, or an empty object. */
export function staticDataOf(manifest: WorkerManifest): JsonObject {
  return manifest.staticData ?? {}
}

/**
 * The SBOM of a version. No timestamps or serial numbers, so it is as deterministic as the build:
 * dependencies sorted by name, then modules in the given (module-tuple) order with their SHA-256.
 */
export function sbomOf(manifest: WorkerManifest, lock: WorkerLock | null, modules: readonly {name: string; content: Uint8Array}[]): Sbom {
  const dependencies = Object.entries(manifest.dependencies ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return {
    bomFormat: 'CycloneDX',
    specVersion: '1.5',
    version: 1,
    metadata: {component: {type: 'application', name: manifest.name}},
    components: [
      ...dependencies.map(
        ([name, declared]): SbomComponent => ({
          type: 'library',
          'bom-ref': `dependency:${name}`,
          name,
          version: lock?.packages[name]?.version ?? declared,
        }),
      ),
      ...modules.map(
        ({name, content}): SbomComponent => ({
          type: 'file',
          'bom-ref': `module:${name}`,
          name,
          hashes: [{alg: 'SHA-256', content: sha256Hex(content)}],
        }),
      ),
    ],
  }
}
