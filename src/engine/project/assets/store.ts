// A version's asset files in the artifact store: one `asset/sha256/…` object per distinct content,
// shared by every version and Worker that serves it, and the integrity check over them.
import {readFile} from 'node:fs/promises'
import {ArtifactError, artifactKeyFor, type ArtifactStore} from '../../../artifacts/store.js'
import {sha256Hex} from '../../../canonical-json.js'
import {KitError} from '../../../errors.js'
import type {BundleAssets, CollectedAssets} from './collect.js'

/** Stores each file (a no-op for one already stored); a file changed since it was hashed is refused. */
export async function storeAssets(artifacts: ArtifactStore, assets: CollectedAssets): Promise<void> {
  const stored = new Set<string>()
  for (const file of assets.files) {
    if (stored.has(file.sha256)) continue
    // put replaces a damaged stored copy, so a deploy after a failed integrity check can mend it.
    const bytes = await readFile(assets.sources.get(file.path)!)
    if (sha256Hex(bytes) !== file.sha256) throw new KitError('usage', `asset ${file.path} changed while the project was read; try again`)
    await artifacts.put('asset', bytes)
    stored.add(file.sha256)
  }
}

/** The first asset file that is missing or does not hash to its key, or null when all are intact. */
export async function assetFilesProblem(artifacts: ArtifactStore, assets: BundleAssets, maxBytes: number): Promise<ArtifactError | null> {
  const checked = new Set<string>()
  for (const file of assets.files) {
    if (checked.has(file.sha256)) continue
    try {
      await artifacts.get(artifactKeyFor('asset', file.sha256), maxBytes)
    } catch (error) {
      if (!(error instanceof ArtifactError)) throw error
      return new ArtifactError(error.reason, error.key, `asset ${file.path}: ${error.message}`)
    }
    checked.add(file.sha256)
  }
  return null
}
