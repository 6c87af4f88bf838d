// The build receipt: what the builder vouches for. Its key set is exactly RECEIPT_KEYS and
// receiptVersion is "1"; the integrity check refuses anything else.
import {z} from 'zod'
import type {JsonObject, WorkerManifest} from './manifest.js'
import {releaseGenerationOf, RELEASE_GENERATION_PATTERN} from './release-generation.js'
import {staticDataOf, type Sbom, type VersionDigests} from './version-digests.js'

export const RECEIPT_VERSION = '1'

export const RECEIPT_KEYS = [
  'builderPolicy',
  'bundleDigest',
  'dependencyDigest',
  'lockDigest',
  'manifestDigest',
  'projectDigest',
  'releaseGeneration',
  'receiptVersion',
  'sbom',
  'sbomDigest',
  'staticData',
  'staticDataDigest',
] as const

export interface BuildReceipt extends VersionDigests {
  builderPolicy: string
  releaseGeneration: string
  receiptVersion: typeof RECEIPT_VERSION
  sbom: Sbom
  staticData: JsonObject
}

const digest = z.string().regex(/^[0-9a-f]{64}$/, {error: 'must be 64 lowercase hex'})
const jsonObject = z.record(z.string(), z.json())

/** Types of a receipt whose key set and version were already checked. The SBOM's content is checked by digest. */
export const receiptSchema = z.strictObject({
  builderPolicy: z.string(),
  bundleDigest: digest,
  dependencyDigest: digest,
  lockDigest: digest,
  manifestDigest: digest,
  projectDigest: digest,
  releaseGeneration: z.string().regex(RELEASE_GENERATION_PATTERN, {error: 'must be 32 lowercase hex'}),
  receiptVersion: z.literal(RECEIPT_VERSION),
  sbom: jsonObject,
  sbomDigest: digest,
  staticData: jsonObject,
  staticDataDigest: digest,
})

export type StoredReceipt = z.infer<typeof receiptSchema>

export function buildReceiptOf(manifest: WorkerManifest, digests: VersionDigests, sbom: Sbom): BuildReceipt {
  return {
    builderPolicy: manifest.builderPolicy,
    bundleDigest: digests.bundleDigest,
    dependencyDigest: digests.dependencyDigest,
    lockDigest: digests.lockDigest,
    manifestDigest: digests.manifestDigest,
    projectDigest: digests.projectDigest,
    releaseGeneration: releaseGenerationOf({...digests, builderPolicy: manifest.builderPolicy}),
    receiptVersion: RECEIPT_VERSION,
    sbom,
    sbomDigest: digests.sbomDigest,
    staticData: staticDataOf(manifest),
    staticDataDigest: digests.staticDataDigest,
  }
}
