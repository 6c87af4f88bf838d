// What workerd runs: one script's release with the values it runs with, as the host state keeps it
// and as the validation sandbox and the shards render it.
import type {Binding, ModuleInfo} from '../protocol/management-api.js'

/** Everything the runtime needs to run one script; module bytes are fetched by digest. */
export interface RunnableScript {
  name: string
  releaseGeneration: string
  mainModule: string
  compatibilityDate: string
  compatibilityFlags: string[]
  modules: ModuleInfo[]
  bindings: Binding[]
  secrets: Array<{name: string; value: string}>
  serviceAccounts: Array<{id: string; username: string; password: string}>
  runtimeConfig: Array<{key: string; valueJson: string}>
  /** The operation settings document (JSON text), or null when none is stored. */
  operationSettingsJson: string | null
}
