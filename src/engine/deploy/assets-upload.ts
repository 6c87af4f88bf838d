// Sends a verified version's asset files to the host before its upload: the host says which
// SHA-256s it lacks and only those are read from the artifact store and sent, in batches small
// enough for its request limit. An unchanged file is never sent twice, whatever Worker serves it.
import {artifactKeyFor, type ArtifactStore} from '../../artifacts/store.js'
import type {EdgeProvider} from '../../provider/types.js'
import type {BundleAssets} from '../project/assets/collect.js'

/** Raw bytes per request (base64 makes it 4/3): well under the host's signed-body limit. */
const BATCH_BYTES = 6 * 1024 * 1024

/** Sends the files the host lacks; returns how many files and bytes went. */
export async function sendMissingAssets(
  provider: EdgeProvider,
  artifacts: ArtifactStore,
  assets: BundleAssets,
  maxAssetBytes: number,
): Promise<{files: number; bytes: number}> {
  const missing = await provider.missingAssets([...new Set(assets.files.map((file) => file.sha256))])
  let batch: Array<{sha256: string; content: Uint8Array}> = []
  let batchBytes = 0
  let bytes = 0
  for (const sha256 of missing) {
    // The integrity check read every one already; a file gone since fails the deploy as missing.
    const content = await artifacts.get(artifactKeyFor('asset', sha256), maxAssetBytes)
    if (batch.length > 0 && (batchBytes + content.byteLength > BATCH_BYTES || batch.length >= 1_000)) {
      await provider.putAssets(batch)
      batch = []
      batchBytes = 0
    }
    batch.push({sha256, content})
    batchBytes += content.byteLength
    bytes += content.byteLength
  }
  if (batch.length > 0) await provider.putAssets(batch)
  return {files: missing.length, bytes}
}
