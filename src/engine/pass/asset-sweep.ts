// The asset half of artifact cleanup: an `asset/sha256/…` object is shared by every version and
// Worker serving its bytes, so it has no intent of its own; it goes when no retained version serves
// it (edge_worker_version_assets) and it was not put within artifact_cleanup.grace_seconds — a
// submission puts its objects (renewing those already there) before its version commits. Stateless,
// so a pass killed at any point leaves only objects a later pass deletes.
import {parseArtifactKey, type ArtifactStore, type StoredArtifact} from '../../artifacts/store.js'
import {faultPoint} from '../faults.js'
import type {LaneRun} from './lane.js'

/** Deletes the unreferenced asset objects not put within the grace; returns how many went. */
export async function sweepAssetObjects(run: LaneRun, artifacts: ArtifactStore): Promise<number> {
  const {settings} = run.engine
  // Object times are the file system's: the wall clock, not the store's.
  const cutoff = Date.now() - settings.artifact_cleanup.grace_seconds * 1000
  let deleted = 0
  let batch: StoredArtifact[] = []
  for await (const object of artifacts.list('asset')) {
    if (run.shouldStop()) return deleted
    if (object.modifiedAt > cutoff) continue
    batch.push(object)
    if (batch.length < settings.artifact_cleanup.batch_size) continue
    deleted += await deleteUnreferenced(run, artifacts, batch, cutoff)
    batch = []
  }
  return deleted + (await deleteUnreferenced(run, artifacts, batch, cutoff))
}

async function deleteUnreferenced(run: LaneRun, artifacts: ArtifactStore, batch: readonly StoredArtifact[], cutoff: number): Promise<number> {
  const digests = batch.map((object) => parseArtifactKey(object.key)!.sha256)
  // Asked per batch, right before deleting, to keep the window for a version committing meanwhile small.
  const references = await run.engine.store.sweeps.assetReferences(digests)
  let deleted = 0
  for (const [index, object] of batch.entries()) {
    if (run.shouldStop()) break
    if (references.has(digests[index]!) || !(await artifacts.deleteIfNotPutSince(object.key, cutoff))) continue
    deleted++
    run.engine.log.debug({key: object.key}, 'Edge Worker artifact cleanup deleted an unreferenced asset object')
    faultPoint('cleanup.after_asset_delete')
  }
  return deleted
}
