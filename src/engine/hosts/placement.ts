// Which Workers have an owner host (docs/many-hosts.md): one whose data lives on a host's disk —
// Durable Objects, KV, D1, R2 or queues — or whose cron triggers must fire once per kit, not once
// per host. Such a Worker runs on its owner alone; every other Worker runs on every active host.
import type {UploadScriptInput} from '../../provider/types.js'
import type {VersionRow} from '../../store/index.js'
import type {WorkerManifest} from '../project/manifest.js'
import {queueConsumersOf, workerBindingsOf} from '../project/worker-config.js'

type Release = Pick<UploadScriptInput, 'bindings' | 'crons' | 'queueConsumers'>

const STATEFUL_BINDINGS: ReadonlySet<string> = new Set(['durable_object', 'kv_namespace', 'd1_database', 'r2_bucket', 'queue'])

export function needsOwner(release: Release): boolean {
  return release.crons.length > 0 || release.queueConsumers.length > 0 || release.bindings.some((binding) => STATEFUL_BINDINGS.has(binding.type))
}

/** The same, for a stored version (a Worker deployed before its kit had several hosts). */
export function versionNeedsOwner(version: VersionRow): boolean {
  const manifest = version.manifest as unknown as WorkerManifest
  // Service bindings hold no data (and need the kit's resolution of their targets): left out.
  const bindings = workerBindingsOf({...manifest, services: []}, new Map())
  return needsOwner({bindings, crons: manifest.crons ?? [], queueConsumers: queueConsumersOf(manifest)})
}
