// `edgeworkers orphan-report`: read-only counts that show whether anything unowned still serves.
// Reads the store, lists the host's scripts (./host-listing.ts) and counts per kind
// (store-only, host-only, retired, serving); on-prem, "serving code" means a script the host has not retired.
// Also lists the static asset files nothing serves: objects of the kit's artifact store no version
// names (artifact cleanup removes them), and files of the host no release names (the host removes them).
// A kit of several hosts (docs/many-hosts.md) is listed host by host: `hosts` holds each host's own
// counts under its scope (a host that does not answer: its error), and the kit-wide counts are over
// what every host that answered lists (a script unowned on any host is unowned).
import {parseArtifactKey} from '../../artifacts/store.js'
import {KitError} from '../../errors.js'
import {ProviderError, type EdgeProvider} from '../../provider/types.js'
import {SCRIPT_NAME_PATTERN, scriptNameFor} from '../../store/index.js'
import type {Engine} from '../context.js'
import {connectMembers} from '../hosts/members.js'
import {listHostScripts, type ListedScript} from './host-listing.js'
import {requireProvider} from '../provider.js'

/** One host's part of the report, keyed by its scope in `hosts`. */
export interface HostOrphans {
  /** Why the host could not be listed (then every count is 0), or null. */
  error: string | null
  host_asset_files_unreferenced: string[]
  listed: number
  unowned: number
  unowned_serving_code: number
}

/** Keys in sorted order: the report prints as one JSON object with sorted keys. */
export interface OrphanReport {
  /** Keys of the kit's asset objects no version serves, sorted. */
  asset_objects_unreferenced: string[]
  /** SHA-256s of the host's asset files no release names, sorted. */
  host_asset_files_unreferenced: string[]
  /** A kit of several hosts only: each host's counts, keyed by its scope. */
  hosts?: Record<string, HostOrphans>
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
  const workers = await store.retirements.workerNames()
  const stored = new Set(workers.map((worker) => worker.script_name))
  const members = await connectMembers(store, settings, engine.hosts, resolution.scope)
  const listing = members.length > 1 ? await listEachHost(engine, members, stored) : await listOneHost(engine, resolution.provider)
  const orphans = await store.retirements.pendingOrphans(resolution.scope, store.clock.now() - settings.host_reconcile.upload_grace_seconds * 1000)
  return {
    asset_objects_unreferenced: await unreferencedAssetObjects(engine),
    host_asset_files_unreferenced: listing.assets,
    ...(listing.hosts ? {hosts: listing.hosts} : {}),
    listed: listing.scripts.length,
    namespace: resolution.scope,
    orphans_pending: orphans.length,
    orphans_unsettled: orphans.filter((orphan) => orphan.unsettled).length,
    stored_name_differs: workers.filter((worker) => worker.script_name !== scriptNameFor(worker.company_id, worker.department_id)).length,
    unowned: listing.scripts.filter((script) => !stored.has(script.scriptName)).length,
    unowned_serving_code: listing.scripts.filter((script) => !stored.has(script.scriptName) && script.state !== 'retired').length,
    worker_rows: workers.length,
  }
}

interface Listing {
  /** One entry per script name; serving (not retired) when any host serves it. */
  scripts: ListedScript[]
  assets: string[]
  hosts?: Record<string, HostOrphans>
}

async function listOneHost(engine: Engine, provider: EdgeProvider): Promise<Listing> {
  const scripts = (await listHostScripts(provider, engine.settings.host_reconcile.listing_max_pages)).filter((script) =>
    SCRIPT_NAME_PATTERN.test(script.scriptName),
  )
  return {scripts, assets: await provider.unreferencedAssets()}
}

async function listEachHost(engine: Engine, members: Awaited<ReturnType<typeof connectMembers>>, stored: Set<string>): Promise<Listing> {
  const hosts: Record<string, HostOrphans> = {}
  const byName = new Map<string, ListedScript>()
  const assets = new Set<string>()
  let failure: KitError | null = null
  for (const member of members) {
    try {
      const listing = await listOneHost(engine, member.provider)
      const unowned = listing.scripts.filter((script) => !stored.has(script.scriptName))
      hosts[member.row.host_scope] = {
        error: null,
        host_asset_files_unreferenced: listing.assets,
        listed: listing.scripts.length,
        unowned: unowned.length,
        unowned_serving_code: unowned.filter((script) => script.state !== 'retired').length,
      }
      for (const script of listing.scripts) if ((byName.get(script.scriptName)?.state ?? 'retired') === 'retired') byName.set(script.scriptName, script)
      for (const asset of listing.assets) assets.add(asset)
    } catch (error) {
      if (!(error instanceof KitError) && !(error instanceof ProviderError)) throw error
      const failed = error instanceof KitError ? error : new KitError('host_unreachable', `edge host ${member.row.host_scope}: ${error.message}`)
      failure ??= failed
      hosts[member.row.host_scope] = {error: failed.message, host_asset_files_unreferenced: [], listed: 0, unowned: 0, unowned_serving_code: 0}
    }
  }
  // No host answered: the report would count nothing and say so nowhere.
  if (Object.values(hosts).every((host) => host.error !== null) && failure) throw failure
  return {scripts: [...byName.values()], assets: [...assets].sort(), hosts}
}

async function unreferencedAssetObjects(engine: Engine): Promise<string[]> {
  const keys: string[] = []
  for await (const object of engine.artifacts.list('asset')) keys.push(object.key)
  const digests = keys.map((key) => parseArtifactKey(key)!.sha256)
  const references = await engine.store.sweeps.assetReferences(digests)
  return keys.filter((_, index) => !references.has(digests[index]!))
}
