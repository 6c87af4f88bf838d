// `edgeworkers orphan-report`: read-only counts that show whether anything unowned still serves.
// Reads the store, lists the host's scripts (./host-listing.ts) and counts per kind
// (store-only, host-only, retired, serving); on-prem, "serving code" means a script the host has not retired.
// Also lists the static asset files nothing serves: objects of the kit's artifact store no version
// names (artifact cleanup removes them), and files of the host no release names (the host removes them).
import {parseArtifactKey} from '../../artifacts/store.js'
import {SCRIPT_NAME_PATTERN, scriptNameFor} from '../../store/index.js'
import type {Engine} from '../context.js'
import {listHostScripts} from './host-listing.js'
import {requireProvider} from '../provider.js'

/** Keys in sorted order: the report prints as one JSON object with sorted keys. */
export interface OrphanReport {
  /** Keys of the kit's asset objects no version serves, sorted. */
  asset_objects_unreferenced: string[]
  /** SHA-256s of the host's asset files no release names, sorted. */
  host_asset_files_unreferenced: string[]
  /** Listed scripts named `dw-` + 48 hex. */
  listed: number
  /** The kit scope whose host was listed. */
  namespace: string
  /** Workers of hard-deleted companies this scope deployed, not yet confirmed retired here. */
  orphans_pending: number
  /** Of those, the ones a deploy may still touch (a row pending, deferred, leased, or ended within the upload grace). */
  orphans_unsettled: number
  /** Worker rows whose stored script name differs from the current derivation. */
  stored_name_differs: number
  /** Listed scripts no Worker row stores. */
  unowned: number
  /** Unowned scripts the host has not retired. */
  unowned_serving_code: number
  worker_rows: number
}

export async function orphanReport(engine: Engine): Promise<OrphanReport> {
  const {store, settings} = engine
  const resolution = await requireProvider(engine, "list the edge host's scripts")
  const scripts = (await listHostScripts(resolution.provider, settings.host_reconcile.listing_max_pages)).filter((script) =>
    SCRIPT_NAME_PATTERN.test(script.scriptName),
  )
  const workers = await store.retirements.workerNames()
  const orphans = await store.retirements.pendingOrphans(resolution.scope, store.clock.now() - settings.host_reconcile.upload_grace_seconds * 1000)
  const stored = new Set(workers.map((worker) => worker.script_name))
  const unowned = scripts.filter((script) => !stored.has(script.scriptName))
  return {
    asset_objects_unreferenced: await unreferencedAssetObjects(engine),
    host_asset_files_unreferenced: await resolution.provider.unreferencedAssets(),
    listed: scripts.length,
    namespace: resolution.scope,
    orphans_pending: orphans.length,
    orphans_unsettled: orphans.filter((orphan) => orphan.unsettled).length,
    stored_name_differs: workers.filter((worker) => worker.script_name !== scriptNameFor(worker.company_id, worker.department_id)).length,
    unowned: unowned.length,
    unowned_serving_code: unowned.filter((script) => script.state !== 'retired').length,
    worker_rows: workers.length,
  }
}

async function unreferencedAssetObjects(engine: Engine): Promise<string[]> {
  const keys: string[] = []
  for await (const object of engine.artifacts.list('asset')) keys.push(object.key)
  const digests = keys.map((key) => parseArtifactKey(key)!.sha256)
  const references = await engine.store.sweeps.assetReferences(digests)
  return keys.filter((_, index) => !references.has(digests[index]!))
}
