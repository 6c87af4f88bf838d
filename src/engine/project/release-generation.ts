// The release generation: the one formula, recomputable from a receipt. It is the first 32 hex of
// SHA-256 over the canonical JSON of
//   {domain: "edgeworkers/release-generation/v1", builderPolicy, <the seven digests>}
// so a change to any artifact, manifest, lock, SBOM, static data or builder policy is a new
// generation, and the domain string keeps it from colliding with any other digest of the same facts.
import {canonicalDigest} from '../../canonical-json.js'
import type {VersionDigests} from './version-digests.js'

const DOMAIN = 'edgeworkers/release-generation/v1'
export const RELEASE_GENERATION_PATTERN = /^[0-9a-f]{32}$/

export function releaseGenerationOf(input: VersionDigests & {builderPolicy: string}): string {
  // Named fields, not a spread: extra properties on the input must not change the generation.
  return canonicalDigest({
    domain: DOMAIN,
    builderPolicy: input.builderPolicy,
    projectDigest: input.projectDigest,
    bundleDigest: input.bundleDigest,
    dependencyDigest: input.dependencyDigest,
    lockDigest: input.lockDigest,
    manifestDigest: input.manifestDigest,
    sbomDigest: input.sbomDigest,
    staticDataDigest: input.staticDataDigest,
  }).slice(0, 32)
}
