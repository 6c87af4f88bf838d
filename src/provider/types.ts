// The provider seam: the engine speaks to an edge runtime only through this interface and never
// speaks HTTP itself. The on-prem implementation (./onprem/) talks to our edge host daemon; whoever
// builds the engine hands it one (a HostConnector), so the engine never names it.
import type {TailLine, WorkerActivity} from '../protocol/tail.js'
import type {D1QueryRequest, D1QueryResult} from '../protocol/api/d1.js'
import type {CronTriggerList} from '../protocol/api/crons.js'
import type {QueueList} from '../protocol/api/queues.js'
import type {WorkerBinding} from '../protocol/worker-bindings.js'
import type {
  AccessPolicy as WireAccessPolicy,
  AccessPolicyMode,
  ControlCopy,
  ControlMutationOperation,
  HostFence,
  ModuleType,
  OperationSettings,
  QueueConsumer,
  ReleaseAssets,
  RuntimeConfigList,
  SecretList,
  ScriptData,
  ScriptState,
  ServiceAccountList,
} from '../protocol/management-api.js'

export type {AccessPolicyMode, ControlCopy, ModuleType, ScriptData, ScriptState}

export interface ScriptModule {
  /** The specifier other modules import it by. */
  name: string
  type: ModuleType
  /** Raw module source bytes. */
  content: Uint8Array
}

export interface UploadScriptInput {
  scriptName: string
  mainModule: string
  compatibilityDate: string
  compatibilityFlags: string[]
  releaseGeneration: string
  builderPolicy: string
  modules: ScriptModule[]
  bindings: WorkerBinding[]
  tags: string[]
  /** The Worker's department id: the host labels the script's metrics with it. */
  department: string
  /** The release's static assets; their files must be on the host first (putAssets). */
  assets: ReleaseAssets | null
  /** Cron triggers: the host runs the Worker's scheduled() handler on each (UTC). */
  crons: string[]
  /** The queues the Worker's queue() handler consumes. */
  queueConsumers: QueueConsumer[]
  /** The kit's ids of the version this release is (tail events carry them; the override header names them). */
  versionIds: string[]
  /** A gradual deployment: the release kept serving beside this one, and its share; null serves this one alone. */
  split: ReleaseSplit | null
}

/** The other release of a gradual deployment, as the host keeps it. */
export interface ReleaseSplit {
  releaseGeneration: string
  versionIds: string[]
  percentage: number
}

export interface ScriptDetails {
  scriptName: string
  releaseGeneration: string
  builderPolicy: string
  state: ScriptState
  /** Module name → SHA-256 hex of its bytes, as the host stored them. */
  moduleDigests: Record<string, string>
  tags: string[]
  split: ReleaseSplit | null
}

export interface ScriptListPage {
  /** handedOver: moved to another host of the kit, not run on this one (docs/many-hosts.md). */
  scripts: Array<{scriptName: string; state: ScriptState; tags: string[]; releaseGeneration: string | null; handedOver: boolean}>
  nextCursor: string | null
}

export interface AccessPolicy {
  mode: AccessPolicyMode
  ipAllowlist: string[]
  /** SHA-256 of the API key; the key itself never leaves the kit. */
  apiKeySha256?: string | null
}

/**
 * One audited control mutation as the host applies it. Secret values, API-key digests and passwords
 * travel here and nowhere else: the outbox keeps only digests (see ../engine/control/operations.ts).
 */
export type ControlMutation = {[K in ControlMutationOperation]: {operation: K} & ControlMutationFields[K]}[ControlMutationOperation]

/** The fields of each control mutation, keyed by the protocol's operations (a missing one does not compile). */
interface ControlMutationFields {
  'access_policy.replace': {mode: AccessPolicyMode; ipAllowlist: string[]; baseRevision: number}
  'access_policy.api_key.rotate': {apiKeySha256: string; apiKeyLastFour: string; baseRevision: number}
  'access_policy.api_key.revoke': {baseRevision: number}
  'runtime_config.replace': {key: string; valueJson: string; baseRevision: number}
  'runtime_config.delete': {key: string; baseRevision: number}
  'operation_settings.replace': {releaseGeneration: string; settingsJson: string; baseRevision: number}
  'operation_settings.revoke': {baseRevision: number}
  'secrets.put': {name: string; value: string}
  'secrets.delete': {name: string}
  'service_accounts.credentials.put': {serviceAccountId: string; username: string; password: string}
  'service_accounts.credentials.delete': {serviceAccountId: string}
}

/** The parts of a script's control state that carry a revision. */
export type RevisionedControl = 'access_policy' | 'runtime_config' | 'operation_settings'

/** What makes a control mutation idempotent on the host and names its receipt. */
export interface MutationMeta {
  mutationId: string
  commandDigest: string
}

/** The control state of one script as the host reports it (the protocol's wire shapes). */
export interface ControlState {
  accessPolicy: WireAccessPolicy
  secrets: SecretList['secrets']
  serviceAccounts: ServiceAccountList['serviceAccounts']
  runtimeConfig: RuntimeConfigList
  operationSettings: OperationSettings
}

export type {HostFence}

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
  /** Whether the host runs workerd's experimental mode (flags workerd marks experimental may run). */
  experimental: boolean
}

/** What the store records of a pairing with an edge host. */
export interface PairingResult {
  scope: string
  host_url: string
  host_fingerprint: string
  host_public_key: string
  shared_secret: string
}

/** A paired host and how long to wait for it. */
export interface HostTarget {
  /** The management listener, e.g. http://127.0.0.1:8788 */
  baseUrl: string
  scope: string
  /** The pairing secret (64 hex). Never logged, never part of an error message. */
  secret: string
  connectTimeoutMs: number
  readTimeoutMs: number
}

/** How the engine reaches edge hosts of one kind: pairs with a new one, and connects to a paired one. */
export interface HostConnector {
  /** Exchanges a host's one-time code for a pairing; `beforeExchange` sees the host's scope before the code is spent, and may refuse by throwing. */
  pair(managementUrl: string, code: string, timeoutMs: number, beforeExchange?: (scope: string) => Promise<void>): Promise<PairingResult>
  connect(target: HostTarget): Promise<EdgeProvider>
}

export interface EdgeProvider {
  /** `onprem:<12 hex>`: the scope every outbox row of this kit is stamped with. */
  readonly scope: string
  describeHost(signal?: AbortSignal): Promise<HostDescription>
  uploadScript(input: UploadScriptInput, signal?: AbortSignal): Promise<ScriptDetails>
  /** Which of these asset SHA-256s the host does not hold. */
  missingAssets(hashes: string[], signal?: AbortSignal): Promise<string[]>
  /** Sends asset files (one request; the caller batches). */
  putAssets(files: Array<{sha256: string; content: Uint8Array}>, signal?: AbortSignal): Promise<void>
  /** The SHA-256s of the asset files the host stores that no release names, sorted. */
  unreferencedAssets(signal?: AbortSignal): Promise<string[]>
  /** null when the host has never had the script. */
  getScript(scriptName: string, signal?: AbortSignal): Promise<ScriptDetails | null>
  /**
   * The readiness probe (`access_policy.get` for a release generation): true once it serves. With
   * `waitMs` the host answers as soon as it serves (or it holds another release), waiting at most that long.
   */
  probeReadiness(scriptName: string, releaseGeneration: string, options?: {waitMs?: number; signal?: AbortSignal}): Promise<boolean>
  listScripts(cursor: string | null, signal?: AbortSignal): Promise<ScriptListPage>
  lockdownScript(scriptName: string, signal?: AbortSignal): Promise<void>
  /** Sends one control mutation; the host applies it at most once per mutation id and keeps a receipt. */
  controlMutation(scriptName: string, mutation: ControlMutation, meta: MutationMeta, signal?: AbortSignal): Promise<unknown>
  /** The receipt of a mutation as the host answers it (unvalidated JSON), or null when it has none. */
  getReceipt(meta: MutationMeta, signal?: AbortSignal): Promise<unknown>
  /** Acknowledges a receipt; the host's answer as it came (the engine requires exactly {acknowledged: true}). */
  acknowledgeReceipt(mutationId: string, signal?: AbortSignal): Promise<unknown>
  /** A script's control state: policy, secret names and digests, credentials without passwords, runtime config, operation settings. */
  controlState(scriptName: string, signal?: AbortSignal): Promise<ControlState>
  /** The current revision of one revisioned part of a script's control state (what a mutation's baseRevision must be). */
  controlRevision(scriptName: string, part: RevisionedControl, signal?: AbortSignal): Promise<number>
  replaceAccessPolicy(scriptName: string, policy: AccessPolicy, signal?: AbortSignal): Promise<void>
  /**
   * A script's whole control state, secret values and passwords included: read only to write it to
   * another host of the kit (docs/many-hosts.md), held in memory, never logged or stored.
   */
  controlCopy(scriptName: string, signal?: AbortSignal): Promise<ControlCopy>
  /** Makes a script's control state exactly `copy`, revisions included; true when anything changed. */
  writeControlCopy(scriptName: string, copy: ControlCopy, signal?: AbortSignal): Promise<boolean>
  purgeSecrets(scriptName: string, signal?: AbortSignal): Promise<void>
  purgeCredentials(scriptName: string, signal?: AbortSignal): Promise<void>
  retireScript(scriptName: string, signal?: AbortSignal): Promise<void>
  /** Deletes a retired script's Durable Object, KV, D1, R2 and queue data on the host, for good (`company purge`). */
  purgeScriptData(scriptName: string, signal?: AbortSignal): Promise<void>
  beginFence(input: {fenceId: string; ttlSeconds: number; reason: string}, signal?: AbortSignal): Promise<HostFence>
  endFence(fenceId: string, signal?: AbortSignal): Promise<HostFence>
  getFence(fenceId: string, signal?: AbortSignal): Promise<HostFence | null>
  /** The active fence, if any, and the most recently lifted ones (newest first). */
  fenceStatus(signal?: AbortSignal): Promise<{active: HostFence | null; recent: HostFence[]}>
  inventory(signal?: AbortSignal): Promise<HostInventory>
  /** Confirms the host current (`serving`: its /readyz may say ready) or drains it, until it restarts (docs/many-hosts.md). */
  setKitReadiness(serving: boolean, signal?: AbortSignal): Promise<void>
  /** A stateful Worker moves to another host of the kit: this host stops running it (docs/many-hosts.md). */
  handOverScript(scriptName: string, signal?: AbortSignal): Promise<void>
  /** The handed-over script's storage files. */
  readScriptData(scriptName: string, signal?: AbortSignal): Promise<ScriptData>
  /** Replaces the script's storage files (refused while it runs on this host). */
  writeScriptData(scriptName: string, data: ScriptData, signal?: AbortSignal): Promise<void>
  /** Removes the handed-over script's storage files. */
  dropScriptData(scriptName: string, signal?: AbortSignal): Promise<void>
  /**
   * Streams the host's data snapshot (a tar, see the protocol) into `file` (created, mode 0600) while
   * fence `fenceId` is active. A cut or refused download leaves no file behind.
   */
  downloadSnapshot(fenceId: string, file: string, signal?: AbortSignal): Promise<{size: number; sha256: string}>
  /**
   * The script's events live, as the host sees them, until `signal` aborts (then it ends quietly) or
   * the stream is cut (then it throws a ProviderError; the caller reconnects).
   */
  tail(scriptName: string, signal: AbortSignal): AsyncIterable<TailLine>
  /** Requests, errors and p99 per Worker over the host's recent window. */
  workerActivity(signal?: AbortSignal): Promise<WorkerActivity>
  /** Runs SQL on one of the script's D1 databases (by binding name), in one transaction. */
  d1Query(scriptName: string, request: D1QueryRequest, signal?: AbortSignal): Promise<D1QueryResult>
  /** The script's queues with their counts as the host reads them now. */
  queues(scriptName: string, signal?: AbortSignal): Promise<QueueList>
  /** The script's cron triggers with their last and next runs. */
  cronTriggers(scriptName: string, signal?: AbortSignal): Promise<CronTriggerList>
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

/**
 * The host answered 401: it does not know this kit's pairing (its data was reset, or it is another
 * host at the paired address). Nothing a retry of the same call fixes; pairing again does.
 */
export function pairingRefused(error: unknown): boolean {
  return error instanceof ProviderError && (error.code === 'edge_host_unpaired' || error.code === 'edge_host_unauthorized')
}
