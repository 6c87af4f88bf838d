// What workerd runs: one script's release with the values it runs with, as the host state keeps it
// and as the validation sandbox and the shards render it.
import {sha256Hex} from '../canonical-json.js'
import type {Binding, ModuleInfo, ModuleType, QueueConsumer} from '../protocol/management-api.js'

/** Everything the runtime needs to run one script; module bytes are fetched by digest. */
export interface RunnableScript {
  name: string
  releaseGeneration: string
  mainModule: string
  compatibilityDate: string
  compatibilityFlags: string[]
  modules: ModuleInfo[]
  bindings: Binding[]
  /** Cron triggers: the shard's cron Worker runs the script's scheduled() on them (../edge-host/triggers/). */
  crons: string[]
  /** The queues its queue() handler consumes (./queue-config.ts). */
  queueConsumers: QueueConsumer[]
  secrets: Array<{name: string; value: string}>
  serviceAccounts: Array<{id: string; username: string; password: string}>
  runtimeConfig: Array<{key: string; valueJson: string}>
  /** The operation settings document (JSON text), or null when none is stored. */
  operationSettingsJson: string | null
}

/** A release as the kit builds it or the host receives it, before anything stores it. */
export interface CandidateRelease {
  name: string
  releaseGeneration: string
  mainModule: string
  compatibilityDate: string
  compatibilityFlags: string[]
  modules: ReadonlyArray<{name: string; type: ModuleType; content: Uint8Array}>
  bindings: Binding[]
  crons: string[]
  queueConsumers: QueueConsumer[]
}

/** What a script runs with besides its release. */
export type RunsWith = Pick<RunnableScript, 'secrets' | 'serviceAccounts' | 'runtimeConfig' | 'operationSettingsJson'>

/**
 * The script a validation sandbox runs for `release`, and the bytes of its modules by SHA-256.
 * `runsWith` is what the script would run with (the host's current values), null for none (the
 * kit's build check, or a script's first release).
 */
export function validationCandidate(release: CandidateRelease, runsWith: RunsWith | null): {script: RunnableScript; modules: Map<string, Buffer>} {
  const modules = release.modules.map((module) => ({...module, sha256: sha256Hex(module.content)}))
  return {
    script: {
      name: release.name,
      releaseGeneration: release.releaseGeneration,
      mainModule: release.mainModule,
      compatibilityDate: release.compatibilityDate,
      compatibilityFlags: release.compatibilityFlags,
      modules: modules.map(({name, type, sha256, content}) => ({name, type, sha256, size: content.length})),
      bindings: release.bindings,
      crons: release.crons,
      queueConsumers: release.queueConsumers,
      secrets: runsWith?.secrets ?? [],
      serviceAccounts: runsWith?.serviceAccounts ?? [],
      runtimeConfig: runsWith?.runtimeConfig ?? [],
      operationSettingsJson: runsWith?.operationSettingsJson ?? null,
    },
    modules: new Map(modules.map(({sha256, content}) => [sha256, Buffer.from(content.buffer, content.byteOffset, content.byteLength)])),
  }
}

const SPLIT_SUFFIX = '.split'

/**
 * workerd's name for a script's split release (a gradual deployment's second version). No script
 * name has a dot, so no request reaches it but through the split; and it is a host name, as the
 * host's agent needs its sockets' names to be (`http://<socket name>`, ../edge-host/runtime/shard-connections.ts).
 */
export function splitServiceName(script: string): string {
  return `${script}${SPLIT_SUFFIX}`
}

/** The script a workerd service name serves (a split release's name, or the script's own). */
export function scriptOfService(service: string): {script: string; split: boolean} {
  const split = service.endsWith(SPLIT_SUFFIX)
  return {script: split ? service.slice(0, -SPLIT_SUFFIX.length) : service, split}
}
