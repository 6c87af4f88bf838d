// The provider seam: the engine speaks to an edge runtime only through this interface and never
// speaks HTTP itself. The on-prem implementation (./onprem/) talks to our edge host daemon.

export type ScriptState = 'active' | 'locked_down' | 'retired'

export interface ScriptModule {
  name: string
  /** Raw module source bytes. */
  content: Uint8Array
}

export interface DurableObjectBinding {
  binding: string
  className: string
}

export interface UploadScriptInput {
  scriptName: string
  mainModule: string
  compatibilityDate: string
  releaseGeneration: string
  builderPolicy: string
  modules: ScriptModule[]
  durableObjects: DurableObjectBinding[]
  tags: string[]
}

export interface ScriptDetails {
  scriptName: string
  releaseGeneration: string
  builderPolicy: string
  state: ScriptState
  /** Module name → SHA-256 hex of its bytes, as the host stored them. */
  moduleDigests: Record<string, string>
  tags: string[]
}

export interface ScriptListPage {
  scripts: Array<{scriptName: string; state: ScriptState; tags: string[]; releaseGeneration: string | null}>
  nextCursor: string | null
}

export type AccessPolicyMode = 'public' | 'api_key' | 'teamsync_internal'

export interface AccessPolicy {
  mode: AccessPolicyMode
  ipAllowlist: string[]
  /** SHA-256 of the API key; the key itself never leaves the kit. */
  apiKeySha256?: string | null
}

export interface HostFence {
  fenceId: string
  reason: string
  startedAt: number
  expiresAt: number
  /** null while active; how and when it was lifted otherwise. */
  liftedAt: number | null
  liftReason: 'ended' | 'expired' | null
}

export interface HostInventory {
  scripts: ScriptListPage['scripts']
  activeFence: HostFence | null
  shards: Array<{index: number; state: string; scripts: number; restarts: number}>
  /** Scripts whose current release the host quarantined after runaway incidents. */
  quarantined: Array<{script: string; releaseGeneration: string; incidents: number; lastIncident: string}>
}

export interface HostDescription {
  /** Where the data plane listens, e.g. http://127.0.0.1:8787 — a Worker answers under /<script>/. */
  publicUrl: string
  baseDomain: string
}

export interface EdgeProvider {
  /** `onprem:<12 hex>`: the scope every outbox row of this kit is stamped with. */
  readonly scope: string
  describeHost(signal?: AbortSignal): Promise<HostDescription>
  uploadScript(input: UploadScriptInput, signal?: AbortSignal): Promise<ScriptDetails>
  /** null when the host has never had the script. */
  getScript(scriptName: string, signal?: AbortSignal): Promise<ScriptDetails | null>
  /** The readiness probe (`access_policy.get` for a release generation): true once it serves. */
  probeReadiness(scriptName: string, releaseGeneration: string, signal?: AbortSignal): Promise<boolean>
  listScripts(cursor: string | null, signal?: AbortSignal): Promise<ScriptListPage>
  lockdownScript(scriptName: string, signal?: AbortSignal): Promise<void>
  replaceAccessPolicy(scriptName: string, policy: AccessPolicy, signal?: AbortSignal): Promise<void>
  purgeSecrets(scriptName: string, signal?: AbortSignal): Promise<void>
  purgeCredentials(scriptName: string, signal?: AbortSignal): Promise<void>
  retireScript(scriptName: string, signal?: AbortSignal): Promise<void>
  beginFence(input: {fenceId: string; ttlSeconds: number; reason: string}, signal?: AbortSignal): Promise<HostFence>
  endFence(fenceId: string, signal?: AbortSignal): Promise<HostFence>
  getFence(fenceId: string, signal?: AbortSignal): Promise<HostFence | null>
  /** The active fence, if any, and the most recently lifted ones (newest first). */
  fenceStatus(signal?: AbortSignal): Promise<{active: HostFence | null; recent: HostFence[]}>
  inventory(signal?: AbortSignal): Promise<HostInventory>
  /**
   * Streams the host's data snapshot (a tar, see the protocol) into `file` (created, mode 0600) while
   * fence `fenceId` is active. A cut or refused download leaves no file behind.
   */
  downloadSnapshot(fenceId: string, file: string, signal?: AbortSignal): Promise<{size: number; sha256: string}>
}

/**
 * How the engine must treat a failed provider call:
 * - `retryable`: nothing happened or a transient refusal (network before send, 5xx, 429) → back off.
 * - `ambiguous`: the request may have been applied (timeout/cut after send) → read back decides.
 * - `terminal`: the host refused for good (4xx, script retired) → settle failed.
 * - `fenced`: the host is inside a backup fence → defer, not an attempt failure.
 */
export type ProviderErrorKind = 'retryable' | 'ambiguous' | 'terminal' | 'fenced'

export class ProviderError extends Error {
  constructor(
    readonly kind: ProviderErrorKind,
    /** Stable code, e.g. `edge_host_script_retired`, `edge_host_unreachable`, `edge_host_5xx`. */
    readonly code: string,
    message: string,
    readonly status?: number,
  ) {
    super(message)
    this.name = 'ProviderError'
  }
}
